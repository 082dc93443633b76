//! Hand-written SVG scatter plot for `dashrank eval`: predicted rank (x) against measured
//! runtime (y, log scale), one plot per matrix. Coordinates use fixed formatting, so the same
//! data always gives the same bytes.

use std::fmt::Write as _;

const W: f64 = 720.0;
const H: f64 = 440.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 58.0;

/// What one plot shows.
pub struct Plot<'a> {
    pub title: &'a str,
    pub subtitle: &'a str,
    /// `(predicted rank, measured ms)` per candidate; rank 1 = predicted fastest.
    pub points: &'a [(usize, f64)],
    /// Measured runtime of the default configuration, drawn as a dashed line.
    pub default_ms: Option<f64>,
}

pub fn render(plot: &Plot) -> String {
    let f = Frame::new(plot);
    let mut s = String::new();
    header(&mut s, plot);
    axes(&mut s, &f);
    reference_lines(&mut s, plot, &f);
    // Points: top 5 predicted highlighted.
    for &(rank, ms) in plot.points.iter().filter(|p| p.1 > 0.0) {
        let fill = if rank <= 5 { "#e67e22" } else { "#2c6fbb" };
        let _ = writeln!(
            s,
            r#"<circle cx="{:.2}" cy="{:.2}" r="3.2" fill="{fill}" fill-opacity="0.8"><title>rank {rank}: {ms:.4} ms</title></circle>"#,
            f.x(rank as f64),
            f.y(ms)
        );
    }
    legend(&mut s, plot, &f);
    let _ = writeln!(s, "</g>\n</svg>");
    s
}

/// The plot area: ranks 1..=n across, measured milliseconds on a log scale up.
struct Frame {
    n: usize,
    ylo: f64,
    yhi: f64,
    pw: f64,
    ph: f64,
}

impl Frame {
    fn new(plot: &Plot) -> Self {
        let n = plot.points.iter().map(|p| p.0).max().unwrap_or(1).max(2);
        let (lo, hi) = range(plot);
        // Pad by 5% of the log range (or a factor 1.5 around a single value).
        let (l0, l1) = (lo.log10(), hi.log10());
        let pad = if l1 > l0 { (l1 - l0) * 0.05 } else { 0.18 };
        Self {
            n,
            ylo: l0 - pad,
            yhi: l1 + pad,
            pw: W - LEFT - RIGHT,
            ph: H - TOP - BOTTOM,
        }
    }

    fn x(&self, rank: f64) -> f64 {
        LEFT + (rank - 0.5) / self.n as f64 * self.pw
    }

    fn y(&self, ms: f64) -> f64 {
        TOP + (self.yhi - ms.log10()) / (self.yhi - self.ylo) * self.ph
    }
}

/// The smallest and largest positive time (the default's included), or 1..10 without any.
fn range(plot: &Plot) -> (f64, f64) {
    let positive = plot.points.iter().map(|p| p.1).filter(|&m| m > 0.0);
    let mut lo = positive.clone().fold(f64::INFINITY, f64::min);
    let mut hi = positive.fold(f64::NEG_INFINITY, f64::max);
    if let Some(d) = plot.default_ms.filter(|&d| d > 0.0) {
        lo = lo.min(d);
        hi = hi.max(d);
    }
    if lo.is_finite() {
        (lo, hi)
    } else {
        (1.0, 10.0)
    }
}

fn header(s: &mut String, plot: &Plot) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        escape(plot.title)
    );
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="40" fill="#444">{}</text>"##,
        escape(plot.subtitle)
    );
}

fn axes(s: &mut String, f: &Frame) {
    let (pw, ph) = (f.pw, f.ph);
    // Frame and grid.
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT:.2}" y="{TOP:.2}" width="{pw:.2}" height="{ph:.2}" fill="none" stroke="#333"/>"##
    );
    for v in log_ticks(10f64.powf(f.ylo), 10f64.powf(f.yhi)) {
        let yy = f.y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT:.2}" y1="{yy:.2}" x2="{:.2}" y2="{yy:.2}" stroke="#ddd"/><text x="{:.2}" y="{:.2}" text-anchor="end">{}</text>"##,
            LEFT + f.pw,
            LEFT - 6.0,
            yy + 4.0,
            tick_label(v)
        );
    }
    for r in rank_ticks(f.n) {
        let xx = f.x(r as f64);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.2}" y1="{:.2}" x2="{xx:.2}" y2="{:.2}" stroke="#333"/><text x="{xx:.2}" y="{:.2}" text-anchor="middle">{r}</text>"##,
            TOP + f.ph,
            TOP + f.ph + 5.0,
            TOP + f.ph + 19.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.2}" y="{:.2}" text-anchor="middle">predicted rank (1 = predicted fastest)</text>"#,
        LEFT + f.pw / 2.0,
        H - 16.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18 {:.2}) rotate(-90)" text-anchor="middle">measured runtime (ms, log scale)</text>"#,
        TOP + f.ph / 2.0
    );
}

fn reference_lines(s: &mut String, plot: &Plot, f: &Frame) {
    // Reference lines: best measured, default.
    if plot.points.iter().any(|p| p.1 > 0.0) {
        let best = plot
            .points
            .iter()
            .map(|p| p.1)
            .filter(|&m| m > 0.0)
            .fold(f64::INFINITY, f64::min);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT:.2}" y1="{yy:.2}" x2="{:.2}" y2="{yy:.2}" stroke="#2a9d4b" stroke-dasharray="4 3"/>"##,
            LEFT + f.pw,
            yy = f.y(best)
        );
    }
    if let Some(d) = plot.default_ms.filter(|&d| d > 0.0) {
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT:.2}" y1="{yy:.2}" x2="{:.2}" y2="{yy:.2}" stroke="#c0392b" stroke-dasharray="6 3"/>"##,
            LEFT + f.pw,
            yy = f.y(d)
        );
    }
}

fn legend(s: &mut String, plot: &Plot, f: &Frame) {
    // Legend.
    let lx = LEFT + f.pw - 180.0;
    let _ = writeln!(
        s,
        r##"<g font-size="11"><circle cx="{:.2}" cy="{:.2}" r="3.2" fill="#e67e22"/><text x="{:.2}" y="{:.2}">predicted top 5</text><line x1="{:.2}" y1="{:.2}" x2="{:.2}" y2="{:.2}" stroke="#2a9d4b" stroke-dasharray="4 3"/><text x="{:.2}" y="{:.2}">best measured</text>"##,
        lx,
        TOP + 12.0,
        lx + 10.0,
        TOP + 16.0,
        lx - 6.0,
        TOP + 28.0,
        lx + 6.0,
        TOP + 28.0,
        lx + 10.0,
        TOP + 32.0
    );
    if plot.default_ms.is_some() {
        let _ = writeln!(
            s,
            r##"<line x1="{:.2}" y1="{:.2}" x2="{:.2}" y2="{:.2}" stroke="#c0392b" stroke-dasharray="6 3"/><text x="{:.2}" y="{:.2}">default</text>"##,
            lx - 6.0,
            TOP + 44.0,
            lx + 6.0,
            TOP + 44.0,
            lx + 10.0,
            TOP + 48.0
        );
    }
}

/// 1-2-5 ticks inside `[lo, hi]`; if that gives fewer than two, decades only are too sparse
/// and the ends are used.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    let span = (hi / lo).log10();
    let mults: &[f64] = if span > 3.0 { &[1.0] } else { &[1.0, 2.0, 5.0] };
    let mut e = lo.log10().floor() as i32;
    while 10f64.powi(e) <= hi * 1.000_001 {
        for &m in mults {
            let v = m * 10f64.powi(e);
            if v >= lo && v <= hi {
                ticks.push(v);
            }
        }
        e += 1;
    }
    if ticks.len() < 2 {
        ticks = vec![lo, (lo * hi).sqrt(), hi];
    }
    ticks
}

/// Three significant digits, trailing zeros dropped: `1`, `20`, `0.337`, `1500`.
fn tick_label(v: f64) -> String {
    let digits = (2 - v.log10().floor() as i32).max(0) as usize;
    let text = format!("{v:.digits$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Ticks at multiples of a 1-2-5 step, at most ~10 of them, starting at 1.
fn rank_ticks(n: usize) -> Vec<usize> {
    let step = [1usize, 2, 5]
        .iter()
        .flat_map(|&m| (0..7).map(move |e| m * 10usize.pow(e)))
        .filter(|&s| n / s <= 10)
        .min()
        .unwrap_or(1);
    std::iter::once(1)
        .chain((step..=n).step_by(step).filter(|&r| r != 1))
        .collect()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
