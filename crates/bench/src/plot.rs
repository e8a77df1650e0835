//! Line charts as SVG and PNG through plotters. Text is laid out and rasterised with an
//! embedded DejaVu Sans (ab_glyph), so no system font, fontconfig or freetype is involved.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::error::{BenchError, Result};

/// Image size in pixels.
pub const WIDTH: u32 = 960;
pub const HEIGHT: u32 = 600;
/// The font family name the charts use.
const FAMILY: &str = "sans-serif";

static FONT: Once = Once::new();

fn register_font() {
    FONT.call_once(|| {
        if plotters::style::register_font(FAMILY, FontStyle::Normal, dejavu::sans::regular())
            .is_err()
        {
            tracing::warn!("the embedded plot font could not be loaded");
        }
        let _ = plotters::style::register_font(FAMILY, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A chart: title, axis labels and lines.
#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<Line>,
}

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn bounds(c: &Chart) -> (f64, f64, f64, f64) {
    let pts = c.lines.iter().flat_map(|l| l.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return (0.0, 1.0, 0.0, 1.0);
    }
    if (x1 - x0).abs() < f64::EPSILON {
        x0 -= 1.0;
        x1 += 1.0;
    }
    let pad = (x1 - x0) * 0.04;
    let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.12 };
    (x0 - pad, x1 + pad, 0.0, y1)
}

/// Tick labels without a needless ".0".
fn tick(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn render<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    c: &Chart,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |e: &dyn std::fmt::Display| e.to_string();
    area.fill(&WHITE).map_err(|x| e(&x))?;
    let (x0, x1, y0, y1) = bounds(c);
    let mut chart = ChartBuilder::on(&area)
        .caption(&c.title, (FAMILY, 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(78)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc(c.x_label.as_str())
        .y_desc(c.y_label.as_str())
        .label_style((FAMILY, 14))
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .axis_desc_style((FAMILY, 16))
        .draw()
        .map_err(|x| e(&x))?;
    for (i, line) in c.lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                line.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|x| e(&x))?
            .label(line.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                line.points
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
            )
            .map_err(|x| e(&x))?;
    }
    if !c.lines.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FAMILY, 13))
            .draw()
            .map_err(|x| e(&x))?;
    }
    area.present().map_err(|x| e(&x))
}

/// Draws `chart` to `base.svg` and `base.png`; returns both paths.
pub fn draw(chart: &Chart, base: &Path) -> Result<(PathBuf, PathBuf)> {
    register_font();
    let svg = base.with_extension("svg");
    let png = base.with_extension("png");
    let fail = |p: &Path, m: String| BenchError::Usage(format!("drawing {}: {m}", p.display()));
    render(
        SVGBackend::new(&svg, (WIDTH, HEIGHT)).into_drawing_area(),
        chart,
    )
    .map_err(|m| fail(&svg, m))?;
    render(
        BitMapBackend::new(&png, (WIDTH, HEIGHT)).into_drawing_area(),
        chart,
    )
    .map_err(|m| fail(&png, m))?;
    Ok((svg, png))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_svg_and_png_with_text() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let chart = Chart {
            title: "Write Rate vs Capacity".into(),
            x_label: "% Capacity".into(),
            y_label: "MiB/s".into(),
            lines: vec![
                Line {
                    label: "1M xfer".into(),
                    points: vec![(10.0, 100.0), (20.0, 90.0), (30.0, 95.0)],
                },
                Line {
                    label: "64M xfer".into(),
                    points: vec![(10.0, 300.0), (20.0, 250.0)],
                },
            ],
        };
        let (svg, png) = draw(&chart, &tmp.path().join("c")).expect("draw");
        if let Some(keep) = std::env::var_os("NACRE_BENCH_KEEP_PLOT") {
            let _ = std::fs::copy(&png, keep);
        }
        let s = std::fs::read_to_string(&svg).expect("svg");
        assert!(s.contains("Write Rate vs Capacity"), "title in svg");
        assert!(s.contains("64M xfer"), "legend in svg");
        let p = std::fs::read(&png).expect("png");
        assert_eq!(&p[..8], b"\x89PNG\r\n\x1a\n");
        assert!(p.len() > 10_000, "png has content: {} bytes", p.len());
    }
}
