//! `ycsb --chart FILE`: an SVG bar chart of ops/s per phase (load, then the workloads in run
//! order) and engine, drawn with plotters' SVG backend as `basalt report --plot` draws its
//! chart.
//!
//! Invariants: one group of bars per phase in run order, one bar per engine in the order the
//! engines ran, each engine always in the same colour with a legend entry, the value written
//! above each bar; the y axis starts at 0 and reaches past the highest bar.

use super::Results;
use crate::BenchResult;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The chart's size in pixels.
const SIZE: (u32, u32) = (1200, 560);
/// Bar colours, by engine position.
const COLOURS: [RGBColor; 3] = [
    RGBColor(70, 110, 170),
    RGBColor(230, 140, 40),
    RGBColor(90, 160, 90),
];

fn plot_err(e: impl std::fmt::Display) -> Box<dyn std::error::Error + Send + Sync> {
    format!("chart: {e}").into()
}

/// A throughput as a short label: 12.3K, 1.05M.
pub fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}K", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// The chart of `results` as an SVG document.
pub fn render_svg(results: &Results) -> BenchResult<String> {
    let phases: Vec<&'static str> = results
        .engines
        .first()
        .map(|(_, ms)| ms.iter().map(|m| m.phase).collect())
        .unwrap_or_default();
    let engines = results.engines.len().max(1);
    let top = results
        .engines
        .iter()
        .flat_map(|(_, ms)| ms.iter().map(|m| m.ops_per_sec()))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.15;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let names: Vec<&str> = results.engines.iter().map(|(e, _)| *e).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("YCSB throughput per workload: {}", names.join(" vs ")),
                ("sans-serif", 22),
            )
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..phases.len().max(1) as f64, 0f64..top)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("operations per second")
            .y_label_formatter(&|v| short(*v))
            .axis_desc_style(("sans-serif", 15))
            .label_style(("sans-serif", 13))
            .light_line_style(TRANSPARENT)
            .draw()
            .map_err(plot_err)?;
        let width = 0.8 / engines as f64;
        for (e, (engine, ms)) in results.engines.iter().enumerate() {
            let colour = COLOURS[e % COLOURS.len()];
            let bars = ms.iter().enumerate().map(|(i, m)| {
                let x = i as f64 + 0.1 + e as f64 * width;
                Rectangle::new([(x, 0.0), (x + width, m.ops_per_sec())], colour.filled())
            });
            chart
                .draw_series(bars)
                .map_err(plot_err)?
                .label(*engine)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], colour.filled())
                });
            let above = ("sans-serif", 11)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Bottom));
            for (i, m) in ms.iter().enumerate() {
                let x = i as f64 + 0.1 + (e as f64 + 0.5) * width;
                let (px, py) = chart.backend_coord(&(x, m.ops_per_sec()));
                root.draw(&Text::new(
                    short(m.ops_per_sec()),
                    (px, py - 3),
                    above.clone(),
                ))
                .map_err(plot_err)?;
            }
        }
        let below = ("sans-serif", 15)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        for (i, phase) in phases.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
            let label = if *phase == "load" {
                "load".to_string()
            } else {
                format!("workload {}", phase.to_uppercase())
            };
            root.draw(&Text::new(label, (px, py + 8), below.clone()))
                .map_err(plot_err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::super::Measured;
    use super::*;
    use hdrhistogram::Histogram;
    use std::time::Duration;

    fn phase(phase: &'static str, ops: u64) -> Measured {
        Measured {
            phase,
            ops,
            elapsed: Duration::from_secs(1),
            latency: Histogram::new(3).unwrap(),
            by_op: [ops, 0, 0, 0, 0],
            scan_rows: 0,
        }
    }

    #[test]
    fn one_bar_per_phase_and_engine() {
        let phases = |k: u64| vec![phase("load", 1000 * k), phase("a", 2500 * k)];
        let results = Results {
            engines: vec![("basalt", phases(1)), ("fjall", phases(2))],
        };
        let svg = render_svg(&results).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("basalt vs fjall"));
        assert!(svg.contains("workload A") && svg.contains("\nload\n"));
        assert!(svg.contains("5.0K") && svg.contains("2.5K"));
        // the background, 4 bars, 2 legend boxes and the legend's frame
        assert!(svg.matches("<rect").count() >= 7, "{svg}");
        assert_eq!(short(1_050_000.0), "1.05M");
        assert_eq!(short(999.0), "999");
    }
}
