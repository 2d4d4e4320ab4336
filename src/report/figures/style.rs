//! What every figure shares: canvas, palette, fonts, glyphs, legends, the standard chart frame.
//!
//! Fonts: plotters' SVG backend with `default-features = false` never opens a font; it writes
//! `<text font-family="sans-serif">` and estimates widths as 0.7 em per byte. Layout here
//! therefore keeps tick labels and legends ASCII and reserves room generously.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::{Axis, AxisCoord};
use crate::analysis::model::CANONICAL_CONFIGS;

pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<AxisCoord, AxisCoord>>;

/// Canvas width of every figure (px); heights follow the content.
pub(crate) const WIDTH: u32 = 960;
/// Height of the title line at the top of every figure (px).
const TITLE_H: u32 = 38;
/// The first pixel row below the title, as a coordinate.
pub(crate) const BODY_TOP: i32 = TITLE_H as i32;
/// Width of the legend column on the right of line charts.
const LEGEND_W: u32 = 250;
/// Width of a line chart beside its legend column.
pub(crate) const PLOT_W: u32 = WIDTH - LEGEND_W;
/// Top of the legend column of a line chart.
pub(crate) const LEGEND_TOP: i32 = BODY_TOP + 8;
/// Left edge of the legend column of a line chart.
pub(crate) const LEGEND_X: i32 = PLOT_W as i32 + 8;
/// Room for config names left of a horizontal bar chart (px).
pub(crate) const NAMES_W: u32 = 190;

const FONT: &str = "sans-serif";
/// plotters divides the size by 1.24 when writing SVG; these give ~18, 14, 12.5, 11 px.
const TITLE_SIZE: f64 = 22.0;
const LABEL_SIZE: f64 = 17.5;
const TICK_SIZE: f64 = 15.5;
pub(crate) const SMALL_SIZE: f64 = 13.5;

pub(crate) const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
pub(crate) const MUTED: RGBColor = RGBColor(0x66, 0x66, 0x66);
const GRID_BOLD: RGBColor = RGBColor(0xd6, 0xd6, 0xd6);
pub(crate) const GRID_LIGHT: RGBColor = RGBColor(0xee, 0xee, 0xee);
pub(crate) const BG: RGBColor = RGBColor(0xff, 0xff, 0xff);

/// Okabe–Ito (yellow left out: too light on white) + a neutral grey, in canonical config order.
/// Black is the baseline (`plain`); grey is the framework-only `noop_connector`.
pub(crate) const PALETTE: [RGBColor; 8] = [
    RGBColor(0x00, 0x00, 0x00), // plain: black
    RGBColor(0x8c, 0x8c, 0x8c), // noop_connector: grey
    RGBColor(0x56, 0xb4, 0xe9), // mooncake_producer: sky blue
    RGBColor(0x00, 0x9e, 0x73), // mooncake_consumer: bluish green
    RGBColor(0xd5, 0x5e, 0x00), // mooncake_both: vermillion
    RGBColor(0x00, 0x72, 0xb2), // nixl_both: blue
    RGBColor(0xcc, 0x79, 0xa7), // lmcache_only: reddish purple
    RGBColor(0xe6, 0x9f, 0x00), // multi_mooncake_lmcache: orange
];

/// Colours for configs outside the canonical eight (in order of appearance).
const EXTRA: [RGBColor; 4] = [
    RGBColor(0x88, 0x22, 0x55),
    RGBColor(0x44, 0xaa, 0x99),
    RGBColor(0x99, 0x99, 0x33),
    RGBColor(0x33, 0x22, 0x88),
];

/// A config's colour: fixed by its canonical position, so it is the same in every figure.
pub(crate) fn config_color(config: &str, all: &[String]) -> RGBColor {
    if let Some(i) = CANONICAL_CONFIGS.iter().position(|c| *c == config) {
        return PALETTE[i];
    }
    let extras: Vec<&String> = all
        .iter()
        .filter(|c| !CANONICAL_CONFIGS.contains(&c.as_str()))
        .collect();
    let i = extras.iter().position(|c| *c == config).unwrap_or(0);
    EXTRA[i % EXTRA.len()]
}

fn font(size: f64) -> TextStyle<'static> {
    font_c(size, INK)
}

pub(crate) fn font_c(size: f64, color: RGBColor) -> TextStyle<'static> {
    let mut t = TextStyle::from((FONT, size).into_font());
    t.color = color.to_backend_color();
    t
}

/// Rough rendered width (px) of ASCII text at a plotters size (≈0.58 em of the SVG font size).
fn text_width(text: &str, size: f64) -> i32 {
    (text.chars().count() as f64 * size / 1.24 * 0.58).round() as i32
}

/// Shortens a label to `max` characters with an ellipsis.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut s: String = text.chars().take(max.saturating_sub(3)).collect();
        s.push_str("...");
        s
    }
}

/// Renders a figure: a `WIDTH`-wide canvas, `title` on the first [`TITLE_H`] pixels, and a body
/// of `body_h` pixels below it. `draw` gets the whole canvas (absolute pixel coordinates) and
/// the body area.
pub(crate) fn figure<F>(title: &str, body_h: u32, draw: F) -> anyhow::Result<String>
where
    F: FnOnce(&Area<'_>, &Area<'_>) -> anyhow::Result<()>,
{
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH, TITLE_H + body_h)).into_drawing_area();
        root.fill(&BG).map_err(err)?;
        let (top, body) = root.split_vertically(TITLE_H);
        top.draw(&Text::new(
            title.to_owned(),
            (14, 20),
            font(TITLE_SIZE).pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(err)?;
        draw(&root, &body)?;
        root.present().map_err(err)?;
    }
    Ok(buf)
}

/// plotters' errors carry the backend type; flatten them into anyhow.
pub(crate) fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("plotting failed: {e}")
}

/// The standard frame: labelled axes with ticks and grid, in transformed coordinates.
pub(crate) fn frame<'a, 'b>(
    area: &'a Area<'b>,
    x: &Axis,
    y: &Axis,
    x_desc: &str,
    y_desc: &str,
    y_label_w: u32,
    x_label_h: u32,
) -> anyhow::Result<Chart<'a, 'b>> {
    let mut chart = ChartBuilder::on(area)
        .margin_top(8)
        .margin_right(16)
        .margin_left(6)
        .margin_bottom(4)
        .x_label_area_size(x_label_h)
        .y_label_area_size(y_label_w)
        .build_cartesian_2d(x.coord(), y.coord())
        .map_err(err)?;
    let xl = |v: &f64| x.label(*v);
    let yl = |v: &f64| y.label(*v);
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&xl)
        .y_label_formatter(&yl)
        .label_style(font(TICK_SIZE))
        .axis_desc_style(font(LABEL_SIZE))
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .axis_style(MUTED)
        .x_labels(x.ticks.len().max(1))
        .y_labels(y.ticks.len().max(1))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// Marker shapes; sizes are radii in px.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Glyph {
    Dot,
    Ring,
    Cross,
    Square,
    Triangle,
}

/// Draws a glyph at pixel `p` on `area` (whose coordinates are absolute pixels).
pub(crate) fn glyph(
    area: &Area<'_>,
    p: (i32, i32),
    g: Glyph,
    color: RGBColor,
    r: i32,
) -> anyhow::Result<()> {
    let (x, y) = p;
    let stroke = ShapeStyle::from(&color).stroke_width(2);
    match g {
        Glyph::Dot => area.draw(&Circle::new(p, r, color.filled())),
        Glyph::Ring => {
            area.draw(&Circle::new(p, r, BG.filled())).map_err(err)?;
            area.draw(&Circle::new(p, r, stroke))
        }
        Glyph::Cross => {
            area.draw(&PathElement::new(
                vec![(x - r, y - r), (x + r, y + r)],
                stroke,
            ))
            .map_err(err)?;
            area.draw(&PathElement::new(
                vec![(x - r, y + r), (x + r, y - r)],
                stroke,
            ))
        }
        Glyph::Square => area.draw(&Rectangle::new([(x - r, y - r), (x + r, y + r)], stroke)),
        Glyph::Triangle => area.draw(&PathElement::new(
            vec![
                (x, y - r - 1),
                (x + r + 1, y + r),
                (x - r - 1, y + r),
                (x, y - r - 1),
            ],
            stroke,
        )),
    }
    .map_err(err)
}

/// One legend row.
#[derive(Debug, Clone)]
pub(crate) enum Key {
    /// A line with a dot (a config's series).
    Series(RGBColor),
    /// A plain line.
    Line(RGBColor),
    /// A glyph alone.
    Mark(Glyph, RGBColor),
    /// A dashed vertical/horizontal reference line.
    Dashed(RGBColor),
    /// A heading with no key.
    Heading,
}

/// Draws a legend column at absolute pixel (x, y); one row per entry, 22 px apart.
/// Returns the y below the last row.
pub(crate) fn legend(
    area: &Area<'_>,
    x: i32,
    y: i32,
    rows: &[(Key, String)],
) -> anyhow::Result<i32> {
    let mut yy = y;
    for (key, label) in rows {
        let cy = yy + 9;
        match key {
            Key::Series(c) => {
                area.draw(&PathElement::new(
                    vec![(x, cy), (x + 26, cy)],
                    ShapeStyle::from(c).stroke_width(3),
                ))
                .map_err(err)?;
                glyph(area, (x + 13, cy), Glyph::Dot, *c, 4)?;
            }
            Key::Line(c) => {
                area.draw(&PathElement::new(
                    vec![(x, cy), (x + 26, cy)],
                    ShapeStyle::from(c).stroke_width(2),
                ))
                .map_err(err)?;
            }
            Key::Mark(g, c) => glyph(area, (x + 13, cy), *g, *c, 5)?,
            Key::Dashed(c) => {
                area.draw(&DashedPathElement::new(
                    vec![(x, cy), (x + 26, cy)],
                    5,
                    4,
                    ShapeStyle::from(c).stroke_width(2),
                ))
                .map_err(err)?;
            }
            Key::Heading => {}
        }
        let (tx, st) = match key {
            Key::Heading => (x, font(LABEL_SIZE)),
            _ => (x + 34, font(TICK_SIZE)),
        };
        area.draw(&Text::new(
            label.clone(),
            (tx, cy),
            st.pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(err)?;
        yy += 22;
    }
    Ok(yy)
}

/// Relative luminance (sRGB, approximate) for choosing black or white text on a fill.
pub(crate) fn luminance(c: RGBColor) -> f64 {
    let f = |v: u8| {
        let v = v as f64 / 255.0;
        if v <= 0.04045 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * f(c.0) + 0.7152 * f(c.1) + 0.0722 * f(c.2)
}

/// A lighter tint of a colour (mix with white), as an opaque colour.
pub(crate) fn tint(c: RGBColor, amount: f64) -> RGBColor {
    let m = |v: u8| {
        (v as f64 + (255.0 - v as f64) * amount)
            .round()
            .clamp(0.0, 255.0) as u8
    };
    RGBColor(m(c.0), m(c.1), m(c.2))
}

/// A vertical error bar between two pixel points with caps of half-width `cap`.
pub(crate) fn vbar(
    area: &Area<'_>,
    x: i32,
    y_lo: i32,
    y_hi: i32,
    color: RGBColor,
    cap: i32,
) -> anyhow::Result<()> {
    let s = ShapeStyle::from(&color).stroke_width(1);
    area.draw(&PathElement::new(vec![(x, y_lo), (x, y_hi)], s))
        .map_err(err)?;
    area.draw(&PathElement::new(vec![(x - cap, y_lo), (x + cap, y_lo)], s))
        .map_err(err)?;
    area.draw(&PathElement::new(vec![(x - cap, y_hi), (x + cap, y_hi)], s))
        .map_err(err)?;
    Ok(())
}

/// A horizontal error bar between two pixel points with caps of half-height `cap`.
pub(crate) fn hbar(
    area: &Area<'_>,
    y: i32,
    x_lo: i32,
    x_hi: i32,
    color: RGBColor,
    cap: i32,
) -> anyhow::Result<()> {
    let s = ShapeStyle::from(&color).stroke_width(1);
    area.draw(&PathElement::new(vec![(x_lo, y), (x_hi, y)], s))
        .map_err(err)?;
    area.draw(&PathElement::new(vec![(x_lo, y - cap), (x_lo, y + cap)], s))
        .map_err(err)?;
    area.draw(&PathElement::new(vec![(x_hi, y - cap), (x_hi, y + cap)], s))
        .map_err(err)?;
    Ok(())
}

/// A dashed pixel line.
pub(crate) fn dashed(
    area: &Area<'_>,
    from: (i32, i32),
    to: (i32, i32),
    color: RGBColor,
    width: u32,
) -> anyhow::Result<()> {
    area.draw(&DashedPathElement::new(
        vec![from, to],
        6,
        4,
        ShapeStyle::from(&color).stroke_width(width),
    ))
    .map_err(err)
}

/// How a label placed at absolute pixels looks: size, colour and anchor. Start from one of the
/// presets ([`TICK`], [`SMALL`], [`NOTE`], [`HEADING`]) and adjust:
/// `style::NOTE.anchor(HPos::Left, VPos::Top).draw(root, "H1: +10%", (x, y))`.
#[derive(Clone, Copy)]
pub(crate) struct Label {
    size: f64,
    color: RGBColor,
    h: HPos,
    v: VPos,
}

/// Tick-sized ink text, anchored left-centre.
pub(crate) const TICK: Label = Label::new(TICK_SIZE);
/// Small ink text.
pub(crate) const SMALL: Label = Label::new(SMALL_SIZE);
/// Small muted text (annotations, notes).
pub(crate) const NOTE: Label = Label::new(SMALL_SIZE).color(MUTED);
/// Axis-label-sized text (panel headings).
pub(crate) const HEADING: Label = Label::new(LABEL_SIZE);

impl Label {
    pub(crate) const fn new(size: f64) -> Label {
        Label {
            size,
            color: INK,
            h: HPos::Left,
            v: VPos::Center,
        }
    }

    pub(crate) const fn color(self, color: RGBColor) -> Label {
        Label { color, ..self }
    }

    pub(crate) const fn anchor(self, h: HPos, v: VPos) -> Label {
        Label { h, v, ..self }
    }

    /// Draws `text` with its anchor at pixel `p` of `area`.
    pub(crate) fn draw(self, area: &Area<'_>, text: &str, p: (i32, i32)) -> anyhow::Result<()> {
        area.draw(&Text::new(
            text.to_owned(),
            p,
            font_c(self.size, self.color).pos(Pos::new(self.h, self.v)),
        ))
        .map_err(err)
    }

    /// Rendered width of `text` in this style (see [`text_width`]).
    pub(crate) fn width(self, text: &str) -> i32 {
        text_width(text, self.size)
    }
}
