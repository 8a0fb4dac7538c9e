//! One [`Chart`] as an SVG document, drawn with plotters' SVG backend (text stays
//! `<text>` elements for the browser to set, so nothing here needs a font).

use crate::Chart;
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::prelude::*;

const SIZE: (u32, u32) = (760, 420);
const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// The chart as an SVG document; the error is the plotting library's message.
pub fn svg(chart: &Chart) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let xs = span(chart, 0, chart.log_x);
        let ys = span(chart, 1, chart.log_y);
        match (chart.log_x, chart.log_y) {
            (false, false) => draw(&root, chart, xs.0..xs.1, ys.0..ys.1),
            (true, false) => draw(&root, chart, (xs.0..xs.1).log_scale(), ys.0..ys.1),
            (false, true) => draw(&root, chart, xs.0..xs.1, (ys.0..ys.1).log_scale()),
            (true, true) => draw(
                &root,
                chart,
                (xs.0..xs.1).log_scale(),
                (ys.0..ys.1).log_scale(),
            ),
        }?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// The axis' range over every point (`axis` 0 is x, 1 is y), with room around it; a
/// linear y axis starts at 0 so bars of cost are compared from nothing.
fn span(chart: &Chart, axis: usize, log: bool) -> (f64, f64) {
    let values = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(move |p| p[axis]))
        .filter(|v| v.is_finite());
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    match (log, axis) {
        (true, _) => (lo / 1.5, hi * 1.5),
        (false, 1) => (lo.min(0.0), if hi > 0.0 { hi * 1.1 } else { 1.0 }),
        (false, _) if hi > lo => {
            let pad = (hi - lo) * 0.05;
            (lo - pad, hi + pad)
        }
        (false, _) => (lo - 1.0, hi + 1.0),
    }
}

fn draw<X, Y>(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    chart: &Chart,
    x: X,
    y: Y,
) -> Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut ctx = ChartBuilder::on(root)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(|e| e.to_string())?;
    ctx.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&|v| number(*v))
        .y_label_formatter(&|v| number(*v))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in chart.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = s.points.iter().map(|p| (p[0], p[1])).collect();
        ctx.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        ctx.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 3, color.filled())),
        )
        .map_err(|e| e.to_string())?;
    }
    if !chart.series.is_empty() {
        ctx.configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A tick label: integers without decimals, large numbers with k and M.
fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = if v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}
