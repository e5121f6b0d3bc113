//! `report.html`: one self-contained page (inline SVG, no scripts, nothing fetched) with the
//! summary, latency over time, throughput over time and the latency percentile curve.

use std::fmt::Write;

use crate::report::{Latency, Report};

/// One line on a chart.
struct Series<'a> {
    name: &'a str,
    color: &'a str,
    points: Vec<(f64, f64)>,
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 44.0;

pub fn render(report: &Report) -> String {
    let mut page = String::new();
    let title = format!(
        "stillweb-loadtest: {:?} workload, {}",
        report.workload,
        arrival(report)
    );
    let _ = write!(
        page,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>body{{font-family:sans-serif;max-width:820px;margin:2em auto;color:#222}}\
         table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px;\
         text-align:right}}th{{background:#f3f3f3}}td:first-child,th:first-child{{text-align:left}}\
         svg{{display:block;margin:1em 0}}</style></head><body><h1>{t}</h1>",
        t = escape(&title)
    );
    let _ = write!(
        page,
        "<p>Target {target}; planned {dur:.0} s, elapsed {el:.1} s; {req} requests, \
         <strong>{err} errors</strong>; achieved {rate:.1} requests/s; {q} distinct queries, seed {seed}.</p>",
        target = escape(&report.target),
        dur = report.duration_s,
        el = report.elapsed_s,
        req = report.requests,
        err = report.errors,
        rate = report.achieved_rate,
        q = report.distinct_queries,
        seed = report.seed,
    );
    page.push_str("<h2>Latency by operation (ms)</h2><table><tr><th>operation</th><th>requests</th><th>errors</th><th>per s</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>p99.9</th><th>max</th></tr>");
    latency_row(
        &mut page,
        "all",
        report.requests,
        report.errors,
        report.achieved_rate,
        &report.latency_ms,
    );
    for (name, op) in &report.operations {
        latency_row(
            &mut page,
            name,
            op.requests,
            op.errors,
            op.rate,
            &op.latency_ms,
        );
    }
    page.push_str("</table>");
    if !report.server_stages_ms.is_empty() {
        page.push_str("<h2>Server stages (Server-Timing, ms)</h2><table><tr><th>stage</th><th>p50</th><th>p95</th><th>p99</th><th>mean</th></tr>");
        for (stage, l) in &report.server_stages_ms {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>",
                escape(stage),
                l.p50,
                l.p95,
                l.p99,
                l.mean
            );
        }
        page.push_str("</table>");
        if let Some(ratio) = report.cache_hit_ratio {
            let _ = write!(
                page,
                "<p>Result cache hits: {:.1}% of searches.</p>",
                ratio * 100.0
            );
        }
    }
    if let Some(e) = &report.episodes {
        let _ = write!(
            page,
            "<p>Agent episodes: {} completed, {} failed.</p>",
            e.completed, e.failed
        );
    }
    if let Some(s) = &report.server {
        let _ = write!(
            page,
            "<p>Server process: {:.2} CPU-seconds ({:.2} ms per search), resident {:.0} MiB at the end ({:.0} MiB private, {:.0} MiB of mapped index files), peak {:.0} MiB.</p>",
            s.cpu_seconds,
            s.cpu_seconds_per_search * 1000.0,
            s.rss_bytes_end as f64 / 1048576.0,
            s.rss_anon_bytes_end as f64 / 1048576.0,
            s.rss_file_bytes_end as f64 / 1048576.0,
            s.peak_rss_bytes as f64 / 1048576.0
        );
    }
    if !report.error_kinds.is_empty() {
        page.push_str("<h2>Errors</h2><table><tr><th>kind</th><th>count</th></tr>");
        for (kind, n) in &report.error_kinds {
            let _ = write!(page, "<tr><td>{}</td><td>{n}</td></tr>", escape(kind));
        }
        page.push_str("</table>");
    }
    let second = |f: fn(&crate::report::SecondReport) -> f64| -> Vec<(f64, f64)> {
        report
            .timeline
            .iter()
            .map(|s| (s.second as f64, f(s)))
            .collect()
    };
    page.push_str(&chart(
        "Latency over time (per second of replies)",
        "seconds since start",
        "ms",
        &[
            Series {
                name: "p50",
                color: "#1f77b4",
                points: second(|s| s.p50_ms),
            },
            Series {
                name: "p99",
                color: "#d62728",
                points: second(|s| s.p99_ms),
            },
        ],
        None,
    ));
    page.push_str(&chart(
        "Throughput over time",
        "seconds since start",
        "per second",
        &[
            Series {
                name: "replies",
                color: "#2ca02c",
                points: second(|s| s.requests as f64),
            },
            Series {
                name: "errors",
                color: "#d62728",
                points: second(|s| s.errors as f64),
            },
        ],
        None,
    ));
    if report.timeline.iter().any(|s| s.server_rss_mib.is_some()) {
        page.push_str(&chart(
            "Server resident memory",
            "seconds since start",
            "MiB",
            &[Series {
                name: "RSS",
                color: "#9467bd",
                points: report
                    .timeline
                    .iter()
                    .filter_map(|s| s.server_rss_mib.map(|m| (s.second as f64, m)))
                    .collect(),
            }],
            None,
        ));
    }
    // Percentiles on a log scale of 1/(1-p), so the tail gets the room.
    let tail = |p: f64| -(1.0 - (p / 100.0).min(0.9999)).log10();
    let ticks = [0.0, 50.0, 90.0, 99.0, 99.9, 99.99]
        .iter()
        .map(|&p| (tail(p), format!("{p}")))
        .collect();
    page.push_str(&chart(
        "Latency by percentile (all requests)",
        "percentile",
        "ms",
        &[Series {
            name: "latency",
            color: "#ff7f0e",
            points: report
                .percentiles
                .iter()
                .map(|p| (tail(p.percentile), p.ms))
                .collect(),
        }],
        Some(ticks),
    ));
    page.push_str("</body></html>\n");
    page
}

fn arrival(report: &Report) -> String {
    match report.arrival {
        crate::drive::Arrival::Open { rate } => format!("open loop at {rate} units/s"),
        crate::drive::Arrival::Closed { concurrency } => {
            format!("closed loop with {concurrency} clients")
        }
    }
}

fn latency_row(page: &mut String, name: &str, requests: u64, errors: u64, rate: f64, l: &Latency) {
    let _ = write!(
        page,
        "<tr><td>{}</td><td>{requests}</td><td>{errors}</td><td>{rate:.1}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>",
        escape(name),
        l.p50,
        l.p90,
        l.p95,
        l.p99,
        l.p999,
        l.max
    );
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A line chart as inline SVG; `x_ticks` replaces the evenly spaced x labels.
fn chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series<'_>],
    x_ticks: Option<Vec<(f64, String)>>,
) -> String {
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = nice_ceiling(y1);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * plot_w;
    let py = |y: f64| TOP + plot_h - y / y1 * plot_h;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" aria-label=\"{t}\" font-size=\"12\">\
         <text x=\"{LEFT}\" y=\"20\" font-size=\"15\" font-weight=\"bold\">{t}</text>\
         <rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"none\" stroke=\"#999\"/>",
        t = escape(title)
    );
    for i in 0..=4 {
        let y = y1 * f64::from(i) / 4.0;
        let _ = write!(
            svg,
            "<line x1=\"{LEFT}\" x2=\"{x2}\" y1=\"{py}\" y2=\"{py}\" stroke=\"#eee\"/>\
             <text x=\"{tx}\" y=\"{ty}\" text-anchor=\"end\">{y}</text>",
            x2 = LEFT + plot_w,
            py = py(y),
            tx = LEFT - 6.0,
            ty = py(y) + 4.0,
            y = trim(y)
        );
    }
    let ticks = x_ticks.unwrap_or_else(|| {
        (0..=5)
            .map(|i| {
                let x = x0 + (x1 - x0) * f64::from(i) / 5.0;
                (x, trim(x))
            })
            .collect()
    });
    for (x, label) in ticks {
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            px(x),
            TOP + plot_h + 16.0,
            escape(&label)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
         <text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">{}</text>",
        LEFT + plot_w / 2.0,
        HEIGHT - 6.0,
        escape(x_label),
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(y_label)
    );
    for (i, s) in series.iter().enumerate() {
        let points: Vec<String> = s
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"1.8\" points=\"{p}\"/>\
             <rect x=\"{lx}\" y=\"{ly}\" width=\"10\" height=\"10\" fill=\"{c}\"/>\
             <text x=\"{tx}\" y=\"{ty}\">{n}</text>",
            c = s.color,
            p = points.join(" "),
            lx = WIDTH - RIGHT - 110.0,
            ly = TOP + 8.0 + 16.0 * i as f64,
            tx = WIDTH - RIGHT - 95.0,
            ty = TOP + 17.0 + 16.0 * i as f64,
            n = escape(s.name)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// The smallest 1, 2 or 5 × 10ⁿ at or above `y` (at least 1), for round axis labels.
fn nice_ceiling(y: f64) -> f64 {
    if y <= 1.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(y.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&c| c >= y)
        .unwrap_or(10.0 * magnitude)
}

fn trim(v: f64) -> String {
    if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_ceilings_are_round() {
        assert_eq!(nice_ceiling(0.3), 1.0);
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(12.0), 20.0);
        assert_eq!(nice_ceiling(430.0), 500.0);
        assert_eq!(nice_ceiling(1000.0), 1000.0);
    }

    #[test]
    fn chart_draws_every_series_and_escapes_text() {
        let svg = chart(
            "a <b>",
            "x",
            "y",
            &[
                Series {
                    name: "one",
                    color: "#000",
                    points: vec![(0.0, 1.0), (1.0, 3.0)],
                },
                Series {
                    name: "two",
                    color: "#111",
                    points: vec![],
                },
            ],
            None,
        );
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt;b&gt;"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    }
}
