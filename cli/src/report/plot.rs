//! `basalt report --plot FILE`: an SVG chart of each table's data share per region, drawn
//! with plotters' SVG backend. One panel per table, stacked: one bar per region in key order
//! (y: share of the table's stored cells, in %), a red line at the even share 1/n, and above
//! the plot (where no bar can hide them) a title with the table's name and region count and
//! a legend giving the largest share.
//!
//! Invariants: bars are in key order, the even-share line is at 100/n %; at most
//! [`MAX_LABELS`] regions get an x label (every k-th one, with its start key), so labels never
//! overlap however many regions a table has.

use super::TableReport;
use crate::error::ToolError;
use basalt_core::client::report::key_to_string;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The most regions labelled on the x axis of one panel.
pub const MAX_LABELS: usize = 16;
/// The chart's width in pixels.
const WIDTH: u32 = 1200;
/// The height of one table's panel in pixels.
const PANEL_HEIGHT: u32 = 440;
/// Characters of a start key shown under its bar.
const KEY_CHARS: usize = 12;

/// The regions labelled on the x axis of a panel of `n` regions: every k-th one from the
/// first, k chosen so at most [`MAX_LABELS`] are.
pub fn labelled_regions(n: usize) -> Vec<usize> {
    let step = n.div_ceil(MAX_LABELS).max(1);
    (0..n).step_by(step).collect()
}

/// A start key as an x label: trailing zero bytes dropped (split points are mostly short
/// prefixes padded with zeros), `Bytes.toStringBinary` form, cut to 12 characters.
pub fn key_label(key: &[u8]) -> String {
    if key.is_empty() {
        return "(start)".to_string();
    }
    let end = key.iter().rposition(|&b| b != 0).map_or(1, |i| i + 1);
    let s = key_to_string(&key[..end]);
    let s = if s.chars().count() > KEY_CHARS {
        let cut: String = s.chars().take(KEY_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        s
    };
    // A key starting or ending with a space would look shorter (or missing): quoted.
    if s.starts_with(' ') || s.ends_with(' ') {
        format!("'{s}'")
    } else {
        s
    }
}

fn plot_err(e: impl std::fmt::Display) -> ToolError {
    ToolError::Plot(e.to_string())
}

/// The chart of `reports` (one panel per table) as an SVG document.
pub fn render_svg(reports: &[TableReport]) -> Result<String, ToolError> {
    let mut svg = String::new();
    let panels = reports.len().max(1);
    let height = PANEL_HEIGHT * u32::try_from(panels).map_err(plot_err)?;
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        if reports.is_empty() {
            root.draw(&Text::new(
                "no tables",
                (20, 40),
                ("sans-serif", 20).into_font(),
            ))
            .map_err(plot_err)?;
        }
        let areas = root.split_evenly((panels, 1));
        for (report, area) in reports.iter().zip(&areas) {
            draw_panel(&root, area, report)?;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn draw_panel(root: &Area<'_>, area: &Area<'_>, r: &TableReport) -> Result<(), ToolError> {
    let n = r.regions.len();
    let shares: Vec<f64> = r.data_shares().iter().map(|s| s * 100.0).collect();
    let even = r.even_share() * 100.0;
    let max = shares.iter().copied().fold(0.0f64, f64::max);
    let top = (max * 1.12).max(even * 1.6).max(1.0);
    let salted = match r.salt_buckets {
        Some(b) => format!(", salted into {b} buckets"),
        None => ", not salted".to_string(),
    };
    // The title and the legend are drawn above the plot, where no bar can hide them.
    let (x0, y0) = (area.get_base_pixel().0 + 80, area.get_base_pixel().1 + 10);
    area.draw(&Text::new(
        format!("{}: {n} regions{salted}", r.table),
        (80, 10),
        ("sans-serif", 22).into_font().color(&BLACK),
    ))
    .map_err(plot_err)?;
    let largest = r.max_data_share().map_or(0.0, |(_, s)| s * 100.0);
    let bars = RGBColor(70, 110, 170);
    let legend = ("sans-serif", 14).into_font().color(&BLACK);
    let legend_y = y0 + 34;
    root.draw(&Rectangle::new(
        [(x0, legend_y + 2), (x0 + 14, legend_y + 12)],
        bars.filled(),
    ))
    .map_err(plot_err)?;
    root.draw(&Text::new(
        format!(
            "share per region, in key order (largest {largest:.2}% = {:.1}x even)",
            if even > 0.0 { largest / even } else { 0.0 }
        ),
        (x0 + 20, legend_y),
        legend.clone(),
    ))
    .map_err(plot_err)?;
    let x1 = x0 + 520;
    root.draw(&PathElement::new(
        [(x1, legend_y + 7), (x1 + 18, legend_y + 7)],
        RED.stroke_width(2),
    ))
    .map_err(plot_err)?;
    root.draw(&Text::new(
        format!("even share 1/{n} = {even:.2}%"),
        (x1 + 24, legend_y),
        legend,
    ))
    .map_err(plot_err)?;
    let area = area.margin(70, 8, 12, 24);
    let mut chart = ChartBuilder::on(&area)
        .x_label_area_size(52)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..n.max(1) as f64, 0f64..top)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(8)
        .y_desc("share of the table's stored cells (%)")
        .y_label_formatter(&|v| format!("{v:.1}"))
        .axis_desc_style(("sans-serif", 15))
        .label_style(("sans-serif", 13))
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(shares.iter().enumerate().map(|(i, s)| {
            let x = i as f64;
            // Bars of many regions get thin gaps; a handful get wide ones.
            let gap = if n > 32 { 0.1 } else { 0.2 };
            Rectangle::new([(x + gap, 0.0), (x + 1.0 - gap, *s)], bars.filled())
        }))
        .map_err(plot_err)?;
    chart
        .draw_series(LineSeries::new(
            [(0.0, even), (n.max(1) as f64, even)],
            RED.stroke_width(2),
        ))
        .map_err(plot_err)?;
    // The x labels: region number and start key under every k-th bar, drawn on the whole
    // image at the bar's pixel position (the chart's own ticks would fall between bars).
    let style = ("sans-serif", 12)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for i in labelled_regions(n) {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&PathElement::new([(x, y), (x, y + 4)], BLACK))
            .map_err(plot_err)?;
        root.draw(&Text::new(format!("#{i}"), (x, y + 7), style.clone()))
            .map_err(plot_err)?;
        let key = r.regions.get(i).map(|g| key_label(&g.start_key));
        root.draw(&Text::new(
            key.unwrap_or_default(),
            (x, y + 22),
            style.clone(),
        ))
        .map_err(plot_err)?;
    }
    let (xm, ym) = chart.backend_coord(&(n as f64 / 2.0, 0.0));
    root.draw(&Text::new(
        "regions in key order (#number and start key)",
        (xm, ym + 38),
        ("sans-serif", 14)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top)),
    ))
    .map_err(plot_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::RegionRow;
    use basalt_core::TableName;
    use bytes::Bytes;

    #[test]
    fn at_most_max_labels_evenly_spaced() {
        for n in 0..600 {
            let l = labelled_regions(n);
            assert!(l.len() <= MAX_LABELS, "{n}: {l:?}");
            assert_eq!(l.first().copied(), (n > 0).then_some(0));
            assert!(l.iter().all(|&i| i < n));
        }
        assert_eq!(
            labelled_regions(128),
            (0..128).step_by(8).collect::<Vec<_>>()
        );
    }

    #[test]
    fn key_labels_are_short_and_binary_safe() {
        assert_eq!(key_label(b""), "(start)");
        assert_eq!(key_label(b"\x02\x00\x00\x00"), "\\x02");
        assert_eq!(key_label(b"\x00\x00"), "\\x00");
        assert_eq!(key_label(b"042"), "042");
        assert_eq!(key_label(b" \x00"), "' '");
        assert_eq!(key_label(b"abcdefghijklmnop"), "abcdefghijk…");
    }

    #[test]
    fn one_panel_per_table_with_a_bar_per_region() {
        let regions = |n: u64| -> Vec<RegionRow> {
            (0..n)
                .map(|i| RegionRow {
                    id: i,
                    start_key: Bytes::from(vec![i as u8]),
                    end_key: Bytes::new(),
                    store_file_bytes: 100 + i,
                    memstore_bytes: 0,
                    store_files: 1,
                    cells: 1,
                    read_requests: 0,
                    write_requests: 0,
                })
                .collect()
        };
        let reports = [
            TableReport {
                table: TableName::parse("a").unwrap(),
                salt_buckets: Some(40),
                regions: regions(40),
            },
            TableReport {
                table: TableName::parse("b").unwrap(),
                salt_buckets: None,
                regions: regions(3),
            },
        ];
        let svg = render_svg(&reports).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        assert!(svg.contains("default:a: 40 regions, salted into 40 buckets"));
        assert!(svg.contains("default:b: 3 regions, not salted"));
        assert!(svg.contains("even share 1/40 = 2.50%"));
        // the white background, the bars and the two legend boxes
        assert!(svg.matches("<rect").count() >= 43, "{svg}");
        assert!(render_svg(&[]).unwrap().contains("no tables"));
    }
}
