//! Figures of a suite measured against a baseline in the same run, printed as a readable
//! table and as one `RESULT <suite>/<name> basalt=<v> <baseline>=<v> ratio=<basalt/baseline>
//! unit=<unit>` line each (higher is better for every figure printed here).

/// One figure: Basalt's value and the baseline's, measured in the same run.
pub struct Figure {
    /// The figure's name within its suite.
    pub name: &'static str,
    /// What the baseline is (`none`, `client_scan`, ...).
    pub baseline: &'static str,
    /// Basalt's value.
    pub basalt: f64,
    /// The baseline's value.
    pub base: f64,
    /// The unit of both values.
    pub unit: &'static str,
}

/// Prints the table (values with `decimals` decimals, figure names `name_width` wide) and
/// the `RESULT` lines of `suite`.
pub fn print(suite: &str, figures: &[Figure], decimals: usize, name_width: usize) {
    println!();
    println!(
        "{:<name_width$} {:>14} {:>14} {:>14} {:>10}",
        "figure", "basalt", "baseline", "baseline", "unit"
    );
    for f in figures {
        println!(
            "{:<name_width$} {:>14.decimals$} {:>14.decimals$} {:>14} {:>10}",
            f.name, f.basalt, f.base, f.baseline, f.unit
        );
    }
    println!();
    for f in figures {
        println!(
            "RESULT {suite}/{} basalt={:.decimals$} {}={:.decimals$} ratio={:.3} unit={}",
            f.name,
            f.basalt,
            f.baseline,
            f.base,
            f.basalt / f.base,
            f.unit,
        );
    }
}
