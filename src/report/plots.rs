//! The report's charts, as SVG (plotters): the latency percentile spectrum, throughput and
//! p99 over time with fault windows shaded, availability under faults, and throughput
//! and p99 against client count, per workload, for a sweep.

use std::path::{Path, PathBuf};

use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use plotters::prelude::*;

use crate::stats::new_histogram;
use crate::summary::{BackendSummary, Summary};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn color(i: usize) -> RGBColor {
    // Distinct, print-friendly colours (Tableau 10).
    const C: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    let (r, g, b) = C[i % C.len()];
    RGBColor(r, g, b)
}

/// A backend's colour, the same in every chart of every run (fixed order, not the order the
/// backends ran in).
pub fn backend_color(name: &str) -> RGBColor {
    const ORDER: [&str; 6] = ["postgres", "redis", "redlock", "zookeeper", "etcd", "memory"];
    match ORDER.iter().position(|n| *n == name) {
        Some(i) => color(i),
        None => color(6 + name.bytes().map(usize::from).sum::<usize>() % 4),
    }
}

/// A fault kind's colour for its bands (kill is the red the Jepsen plots use).
pub fn fault_color(f: &str) -> RGBColor {
    let kind = f.split(|c: char| !c.is_ascii_alphabetic()).next().unwrap_or(f);
    match kind {
        "kill" => RGBColor(214, 39, 40),
        "pause" => RGBColor(255, 127, 14),
        "partition" => RGBColor(148, 103, 189),
        "isolate" => RGBColor(140, 86, 75),
        "delay" => RGBColor(188, 189, 34),
        "clock" => RGBColor(227, 119, 194),
        "failover" => RGBColor(23, 190, 207),
        _ => RGBColor(127, 127, 127),
    }
}

/// What a legend entry shows.
enum Swatch {
    Line(RGBAColor),
    Band(RGBAColor),
}

/// A legend in its own panel beside the chart, so it never hides data.
fn legend_panel<DB: DrawingBackend>(area: &DrawingArea<DB, plotters::coord::Shift>, entries: &[(String, Swatch)]) -> Res<()>
where
    DB::ErrorType: 'static,
{
    for (i, (label, sw)) in entries.iter().enumerate() {
        let y = 40 + i as i32 * 20;
        match sw {
            Swatch::Line(c) => area.draw(&PathElement::new(vec![(5, y), (25, y)], c.stroke_width(2)))?,
            Swatch::Band(c) => area.draw(&Rectangle::new([(5, y - 6), (25, y + 6)], c.filled()))?,
        }
        area.draw(&Text::new(label.clone(), (30, y - 7), ("sans-serif", 13)))?;
    }
    Ok(())
}

/// A phase's per-second acquisitions with every second present: a second in which nothing
/// was acquired is a 0, not a gap the line would bridge.
fn per_second(w: &crate::summary::WorkloadSummary) -> Vec<(u32, f64, f64)> {
    let len = w.timeseries.iter().map(|p| p.t + 1).max().unwrap_or(0);
    let mut out: Vec<(u32, f64, f64)> = (0..len).map(|t| (t, 0.0, 0.0)).collect();
    for p in &w.timeseries {
        out[p.t as usize] = (p.t, p.ok as f64, p.p99_us as f64 / 1000.0);
    }
    out
}

/// Whether an `.hlog` file name is one of this backend's phases of this workload (and client
/// count, when given): `backend-workload[-cN][-rK]-acquire.hlog`.
fn phase_file(name: &str, backend: &str, workload: &str, clients: Option<usize>) -> bool {
    let Some(rest) = name.strip_prefix(&format!("{backend}-{workload}")).and_then(|r| r.strip_suffix("-acquire.hlog")) else { return false };
    let mut seen_c = None;
    for part in rest.split('-').skip(1) {
        if let Some(n) = part.strip_prefix('c').and_then(|n| n.parse::<usize>().ok()) {
            seen_c = Some(n);
        } else if part.strip_prefix('r').and_then(|n| n.parse::<u32>().ok()).is_none() {
            return false;
        }
    }
    rest.is_empty() || rest.starts_with('-') && clients.is_none_or(|c| seen_c.is_none_or(|n| n == c))
}

/// Merge every interval of one backend's `.hlog` files of one workload (all its repeats).
pub fn phase_histogram(run_dir: &Path, backend: &str, workload: &str, clients: Option<usize>) -> Option<Histogram<u64>> {
    let dir = run_dir.join("hdr");
    let mut h = new_histogram();
    let mut any = false;
    let mut de = Deserializer::new();
    for e in std::fs::read_dir(&dir).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !phase_file(&name, backend, workload, clients) {
            continue;
        }
        let Ok(bytes) = std::fs::read(e.path()) else { continue };
        for entry in IntervalLogIterator::new(&bytes).flatten() {
            if let LogEntry::Interval(i) = entry {
                let Ok(raw) = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, i.encoded_histogram()) else { continue };
                let Ok(ih) = de.deserialize::<u64, _>(&mut &raw[..]) else { continue };
                if h.add(&ih).is_ok() {
                    any = true;
                }
            }
        }
    }
    any.then_some(h)
}

/// x = -log10(1 - q): 0 at the median's left edge, 1 at 90%, 2 at 99%, 3 at 99.9%...
fn nines(q: f64) -> f64 {
    -(1.0 - q.min(0.99999)).log10()
}

fn percent_label(x: &f64) -> String {
    let q = 1.0 - 10f64.powf(-x);
    let p = q * 100.0;
    if p < 99.0 {
        format!("{p:.0}%")
    } else {
        let digits = (x.round() as usize).saturating_sub(2);
        format!("{p:.digits$}%")
    }
}

/// The acquire-latency percentile spectrum of every backend on one chart (log scales).
pub fn spectrum(run_dir: &Path, s: &Summary, out: &Path) -> Res<bool> {
    // One curve per backend · workload (· clients, in a sweep): never pooled over workloads.
    let mut series: Vec<(String, Vec<(f64, f64)>, RGBColor, f64)> = Vec::new();
    for b in s.backends.iter().filter(|b| b.failure.is_none()) {
        let mut seen: Vec<(String, usize)> = Vec::new();
        for w in &b.workloads {
            if seen.contains(&(w.name.clone(), w.clients)) {
                continue;
            }
            seen.push((w.name.clone(), w.clients));
            let sweep = b.workloads.iter().any(|x| x.name == w.name && x.clients != w.clients);
            let pts: Vec<(f64, f64)> = match phase_histogram(run_dir, &b.name, &w.name, sweep.then_some(w.clients)) {
                Some(h) if !h.is_empty() => {
                    h.iter_quantiles(4).map(|v| (nines(v.quantile_iterated_to()), v.value_iterated_to().max(1) as f64 / 1000.0)).collect()
                }
                _ => {
                    let p = &w.acquire_latency_us;
                    if p.count == 0 {
                        continue;
                    }
                    [(0.5, p.p50), (0.9, p.p90), (0.99, p.p99), (0.999, p.p999), (0.9999, p.p9999), (0.99999, p.max)]
                        .iter()
                        .map(|(q, v)| (nines(*q), (*v).max(1) as f64 / 1000.0))
                        .collect()
                }
            };
            let label = if sweep { format!("{} · {} · {} clients", b.name, w.name, w.clients) } else { format!("{} · {}", b.name, w.name) };
            // The backend's colour; its second and later workloads lighter.
            let shade = [1.0, 0.55, 0.35][(seen.len() - 1).min(2)];
            series.push((label, pts, backend_color(&b.name), shade));
        }
    }
    if series.is_empty() {
        return Ok(false);
    }
    let ymax = series.iter().flat_map(|(_, p, _, _)| p.iter().map(|x| x.1)).fold(1.0, f64::max) * 2.0;
    let ymin = series.iter().flat_map(|(_, p, _, _)| p.iter().map(|x| x.1)).fold(f64::MAX, f64::min).max(0.001) / 2.0;
    let root = SVGBackend::new(out, (1000, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let (root, side) = root.split_horizontally(760);
    let mut chart = ChartBuilder::on(&root)
        .caption("Acquire latency by percentile", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..5.3f64, (ymin..ymax).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("latency (ms, log scale)")
        .x_labels(6)
        .x_label_formatter(&percent_label)
        .y_label_formatter(&|v| format!("{v}"))
        .draw()?;
    let mut legend = Vec::new();
    for (name, pts, c, shade) in &series {
        let c = c.mix(*shade);
        chart.draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?;
        legend.push((name.clone(), Swatch::Line(c)));
    }
    legend_panel(&side, &legend)?;
    root.present()?;
    Ok(true)
}

/// One backend's phases laid end to end: per-second points (seconds, acq/s, p99 ms), every
/// second present; fault windows (start, end, "fault targets"); phases (start, end, warm-up
/// end, name).
struct Timeline {
    pts: Vec<(f64, f64, f64)>,
    faults: Vec<(f64, f64, String)>,
    phases: Vec<(f64, f64, f64, String)>,
}

fn timeline(b: &BackendSummary) -> Timeline {
    let mut t = Timeline { pts: Vec::new(), faults: Vec::new(), phases: Vec::new() };
    let mut offset = 0.0;
    for w in &b.workloads {
        let secs = per_second(w);
        for &(s, ok, p99) in &secs {
            t.pts.push((offset + s as f64 + 1.0, ok, p99));
        }
        let len = secs.len() as f64;
        for f in crate::faultlog::windows(&w.nemesis) {
            let end = f.heal.map_or(offset + len, |h| offset + h as f64 / 1000.0);
            t.faults.push((offset + f.start as f64 / 1000.0, end, format!("{} {}", f.label(), f.targets.join(","))));
        }
        let label = if w.repeat > 0 { format!("{} #{}", w.name, w.repeat + 1) } else { w.name.clone() };
        t.phases.push((offset, offset + len, offset + w.warmup_s.min(len), label));
        offset += len;
    }
    t
}

const WARMUP: RGBColor = RGBColor(127, 127, 127);

/// Throughput and p99 over time for one backend: phases and warm-ups marked, fault windows
/// as bands coloured by fault kind and labelled with the fault and its targets (Jepsen
/// style), the legend beside the chart.
pub fn over_time(b: &BackendSummary, out: &Path) -> Res<bool> {
    let t = timeline(b);
    if t.pts.is_empty() {
        return Ok(false);
    }
    let xmax = t.pts.last().map(|p| p.0).unwrap_or(1.0).max(1.0);
    let tmax = (t.pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.25).ceil();
    let lmax = t.pts.iter().map(|p| p.2).fold(0.01, f64::max) * 2.0;
    let root = SVGBackend::new(out, (1000, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(&format!("{}: throughput and p99 over time", b.name), ("sans-serif", 22))?;
    let (root, side) = root.split_horizontally(800);
    let (top, bottom) = root.split_vertically(260);
    let line = backend_color(&b.name);
    let int = |v: &f64| format!("{:.0}", v);
    let mut c1 = ChartBuilder::on(&top).margin(10).x_label_area_size(25).y_label_area_size(70).build_cartesian_2d(0f64..xmax, 0f64..tmax)?;
    c1.configure_mesh().y_desc("acquisitions/s").x_labels(12).y_labels(6).x_label_formatter(&int).y_label_formatter(&int).draw()?;
    let mut c2 = ChartBuilder::on(&bottom)
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..xmax, (0.01f64..lmax).log_scale())?;
    c2.configure_mesh().x_desc("seconds").y_desc("p99 ms (log)").x_labels(12).x_label_formatter(&int).y_label_formatter(&|v| format!("{v}")).draw()?;
    // Warm-ups, then faults, then phase boundaries, then the data on top.
    c1.draw_series(t.phases.iter().map(|(s, _, w, _)| Rectangle::new([(*s, 0.0), (*w, tmax)], WARMUP.mix(0.12).filled())))?;
    c2.draw_series(t.phases.iter().map(|(s, _, w, _)| Rectangle::new([(*s, 0.01), (*w, lmax)], WARMUP.mix(0.12).filled())))?;
    c1.draw_series(t.faults.iter().map(|(s, e, f)| Rectangle::new([(*s, 0.0), (*e, tmax)], fault_color(f).mix(0.18).filled())))?;
    c2.draw_series(t.faults.iter().map(|(s, e, f)| Rectangle::new([(*s, 0.01), (*e, lmax)], fault_color(f).mix(0.18).filled())))?;
    c1.draw_series(t.faults.iter().enumerate().map(|(i, (s, _, f))| {
        // Labels alternate between two rows so neighbouring bands do not overwrite each other.
        let y = tmax * if i % 2 == 0 { 0.97 } else { 0.90 };
        Text::new(f.clone(), (*s, y), ("sans-serif", 11).into_font().color(&fault_color(f)))
    }))?;
    for (s, _, _, name) in &t.phases {
        c1.draw_series(std::iter::once(PathElement::new(vec![(*s, 0.0), (*s, tmax)], BLACK.mix(0.5).stroke_width(1))))?;
        c2.draw_series(std::iter::once(PathElement::new(vec![(*s, 0.01), (*s, lmax)], BLACK.mix(0.5).stroke_width(1))))?;
        c1.draw_series(std::iter::once(Text::new(name.clone(), (*s + xmax * 0.005, tmax * 0.82), ("sans-serif", 12))))?;
    }
    c1.draw_series(LineSeries::new(t.pts.iter().map(|p| (p.0, p.1)), line.stroke_width(2)))?;
    c2.draw_series(LineSeries::new(t.pts.iter().filter(|p| p.2 > 0.0).map(|p| (p.0, p.2)), line.stroke_width(2)))?;
    let mut legend = vec![
        ("acq/s (top), p99 (bottom)".to_string(), Swatch::Line(line.to_rgba())),
        ("warm-up (not measured)".to_string(), Swatch::Band(WARMUP.mix(0.3))),
    ];
    let mut kinds: Vec<&str> = t.faults.iter().map(|(_, _, f)| f.split(' ').next().unwrap_or("")).collect();
    kinds.sort();
    kinds.dedup();
    for k in kinds {
        legend.push((k.to_string(), Swatch::Band(fault_color(k).mix(0.3))));
    }
    legend_panel(&side, &legend)?;
    root.present()?;
    Ok(true)
}

/// Throughput over time for one workload, every backend on one scale (its phase's seconds,
/// warm-up shaded), one colour per backend. Repeats (`--repeat`) are drawn separately, lighter.
pub fn workload_throughput(s: &Summary, workload: &str, out: &Path) -> Res<bool> {
    let mut series: Vec<(String, Vec<(f64, f64)>, RGBAColor)> = Vec::new();
    let mut warm = 0.0f64;
    for b in s.backends.iter().filter(|b| b.failure.is_none()) {
        for w in b.workloads.iter().filter(|w| w.name == workload) {
            let pts: Vec<(f64, f64)> = per_second(w).iter().map(|&(t, ok, _)| (t as f64 + 1.0, ok)).collect();
            if pts.is_empty() {
                continue;
            }
            warm = warm.max(w.warmup_s);
            let label = if w.repeat > 0 { format!("{} #{}", b.name, w.repeat + 1) } else if w.clients > 0 && b.workloads.iter().any(|x| x.name == w.name && x.clients != w.clients) { format!("{} · {} clients", b.name, w.clients) } else { b.name.clone() };
            let c = backend_color(&b.name).mix(if w.repeat > 0 { 0.45 } else { 1.0 });
            series.push((label, pts, c));
        }
    }
    if series.is_empty() {
        return Ok(false);
    }
    let xmax = series.iter().flat_map(|(_, p, _)| p.iter().map(|x| x.0)).fold(1.0, f64::max);
    let ymax = (series.iter().flat_map(|(_, p, _)| p.iter().map(|x| x.1)).fold(1.0, f64::max) * 1.15).ceil();
    let root = SVGBackend::new(out, (1000, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let (root, side) = root.split_horizontally(800);
    let int = |v: &f64| format!("{:.0}", v);
    let mut c = ChartBuilder::on(&root)
        .caption(format!("{workload}: throughput over time, every backend"), ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
    c.configure_mesh().x_desc("seconds since the phase started").y_desc("acquisitions/s").x_labels(12).y_labels(6).x_label_formatter(&int).y_label_formatter(&int).draw()?;
    if warm > 0.0 {
        c.draw_series(std::iter::once(Rectangle::new([(0.0, 0.0), (warm, ymax)], WARMUP.mix(0.12).filled())))?;
    }
    let mut legend = Vec::new();
    for (label, pts, col) in &series {
        c.draw_series(LineSeries::new(pts.iter().copied(), col.stroke_width(2)))?;
        legend.push((label.clone(), Swatch::Line(*col)));
    }
    if warm > 0.0 {
        legend.push(("warm-up (not measured)".to_string(), Swatch::Band(WARMUP.mix(0.3))));
    }
    legend_panel(&side, &legend)?;
    root.present()?;
    Ok(true)
}

/// Availability under faults per backend (share of fault seconds with a success).
pub fn availability(s: &Summary, out: &Path) -> Res<bool> {
    let rows: Vec<(String, f64)> =
        s.backends.iter().filter_map(|b| b.availability.as_ref().map(|a| (b.name.clone(), a.success_seconds_pct))).collect();
    if rows.is_empty() {
        return Ok(false);
    }
    let root = SVGBackend::new(out, (900, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = rows.len();
    let mut chart = ChartBuilder::on(&root)
        .caption("Availability during faults", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..n as f64, 0f64..115f64)?;
    let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("% of fault seconds with a success")
        .y_label_formatter(&|y| if *y <= 100.0 { format!("{y:.0}") } else { String::new() })
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 && i < names.len() {
                names[i].clone()
            } else {
                String::new()
            }
        })
        .draw()?;
    chart.draw_series(rows.iter().enumerate().map(|(i, (_, v))| {
        Rectangle::new([(i as f64 + 0.2, 0.0), (i as f64 + 0.8, *v)], backend_color(&rows[i].0).filled())
    }))?;
    // A bar of 0% has no height: an outlined slot and its figure above every bar say what
    // was measured, so an empty slot never reads as a missing one.
    chart.draw_series(rows.iter().enumerate().filter(|(_, (_, v))| *v < 1.0).map(|(i, (name, _))| {
        Rectangle::new([(i as f64 + 0.2, 0.0), (i as f64 + 0.8, 2.0)], backend_color(name).stroke_width(2))
    }))?;
    chart.draw_series(rows.iter().enumerate().map(|(i, (_, v))| {
        Text::new(format!("{v:.0}%"), (i as f64 + 0.42, v.max(2.0) + 6.0), ("sans-serif", 14).into_font())
    }))?;
    root.present()?;
    Ok(true)
}

/// One workload's scaling curves: throughput (top) and p99 (bottom, log) against clients
/// on a log2 axis, one colour per backend, each backend's knee ringed and labelled (see
/// `summary::scaling`).
pub fn scaling(s: &Summary, workload: &str, out: &Path) -> Res<bool> {
    let curves: Vec<crate::summary::scaling::Curve> = crate::summary::scaling::curves(s).into_iter().filter(|c| c.workload == workload).collect();
    if curves.is_empty() {
        return Ok(false);
    }
    let x = |c: usize| (c.max(1) as f64).log2();
    let xmax = curves.iter().flat_map(|c| c.points.iter().map(|p| x(p.clients))).fold(1.0, f64::max) + 0.3;
    let tmax = curves.iter().flat_map(|c| c.points.iter().map(|p| p.ops_per_sec)).fold(1.0, f64::max) * 1.15;
    let lmax = curves.iter().flat_map(|c| c.points.iter().map(|p| p.p99_ms)).fold(0.01, f64::max) * 2.0;
    let lmin = curves.iter().flat_map(|c| c.points.iter().map(|p| p.p99_ms)).filter(|v| *v > 0.0).fold(f64::MAX, f64::min).min(lmax / 4.0).max(0.001) / 2.0;
    let root = SVGBackend::new(out, (900, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(&format!("{workload}: throughput and p99 against clients (knee ringed)"), ("sans-serif", 22))?;
    let (top, bottom) = root.split_vertically(300);
    let xlabel = |v: &f64| format!("{:.0}", 2f64.powf(*v));
    let xticks = (xmax.floor() as usize + 1).min(12);
    let mut c1 = ChartBuilder::on(&top).margin(10).x_label_area_size(25).y_label_area_size(70).build_cartesian_2d(-0.3f64..xmax, 0f64..tmax)?;
    c1.configure_mesh().y_desc("acquisitions/s").x_labels(xticks).x_label_formatter(&xlabel).y_label_formatter(&|v| format!("{v:.0}")).draw()?;
    let mut c2 = ChartBuilder::on(&bottom)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.3f64..xmax, (lmin..lmax).log_scale())?;
    c2.configure_mesh().x_desc("clients (log2)").y_desc("p99 ms (log)").x_labels(xticks).x_label_formatter(&xlabel).y_label_formatter(&|v| format!("{v}")).draw()?;
    for c in curves.iter() {
        let col = backend_color(&c.backend);
        let t: Vec<(f64, f64)> = c.points.iter().map(|p| (x(p.clients), p.ops_per_sec)).collect();
        let l: Vec<(f64, f64)> = c.points.iter().filter(|p| p.p99_ms > 0.0).map(|p| (x(p.clients), p.p99_ms)).collect();
        c1.draw_series(LineSeries::new(t.iter().copied(), col.stroke_width(2)).point_size(4))?
            .label(c.backend.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
        c2.draw_series(LineSeries::new(l.iter().copied(), col.stroke_width(2)).point_size(4))?;
        if let Some(k) = c.knee.and_then(|k| c.points.get(k)) {
            let kx = x(k.clients);
            c1.draw_series(std::iter::once(Circle::new((kx, k.ops_per_sec), 10, col.stroke_width(2))))?;
            c1.draw_series(std::iter::once(Text::new(format!("knee {}", k.clients), (kx, k.ops_per_sec), ("sans-serif", 14).into_font().color(&col))))?;
            if k.p99_ms > 0.0 {
                c2.draw_series(std::iter::once(Circle::new((kx, k.p99_ms), 10, col.stroke_width(2))))?;
            }
        }
    }
    c1.configure_series_labels().position(SeriesLabelPosition::UpperLeft).background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    root.present()?;
    Ok(true)
}

/// The node name's backend: `redis-2` -> `redis`, `postgres` -> `postgres`.
fn node_group(name: &str) -> &str {
    match name.rsplit_once('-') {
        Some((head, tail)) if tail.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => name,
    }
}

/// dlbench's memory and open files and the servers' memory (summed per backend) over the
/// run, from `resources.jsonl`, with the warm-up the trends exclude marked.
pub fn resources(run_dir: &Path, out: &Path) -> Res<bool> {
    let samples = match crate::usage::read(&run_dir.join("resources.jsonl")) {
        Ok(s) if s.len() >= 2 => s,
        _ => return Ok(false),
    };
    let xmax = samples.last().map(|s| s.t).unwrap_or(1.0).max(1.0);
    let warm = crate::usage::warmup_for(xmax);
    let mut groups: std::collections::BTreeMap<String, Vec<(f64, f64)>> = Default::default();
    for s in &samples {
        let mut per: std::collections::BTreeMap<&str, f64> = Default::default();
        for (n, kb) in &s.servers {
            *per.entry(node_group(n)).or_default() += *kb as f64 / 1024.0;
        }
        for (g, mb) in per {
            groups.entry(g.to_string()).or_default().push((s.t, mb));
        }
    }
    let root = SVGBackend::new(out, (900, 720)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled("Resources over the run (sampled every second)", ("sans-serif", 22))?;
    let panels = root.split_evenly((3, 1));
    let warm_style = RGBColor(127, 127, 127).mix(0.15);
    let rss: Vec<(f64, f64)> = samples.iter().map(|s| (s.t, s.rss_kb as f64 / 1024.0)).collect();
    let fds: Vec<(f64, f64)> = samples.iter().map(|s| (s.t, s.fds as f64)).collect();
    let heap: Vec<(f64, f64)> = samples.iter().filter_map(|s| s.heap_kb.map(|kb| (s.t, kb as f64 / 1024.0))).collect();
    for (i, (label, pts)) in [("dlbench RSS (MiB)", &rss), ("dlbench open files", &fds)].into_iter().enumerate() {
        let ymax = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.2;
        let mut c = ChartBuilder::on(&panels[i]).margin(10).x_label_area_size(25).y_label_area_size(70).build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
        c.configure_mesh().y_desc(label).x_labels(10).y_label_formatter(&|v| format!("{v:.0}")).draw()?;
        c.draw_series(std::iter::once(Rectangle::new([(0.0, 0.0), (warm, ymax)], warm_style.filled())))?
            .label("warm-up (not in the trend)")
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], warm_style.filled()));
        c.draw_series(LineSeries::new(pts.iter().copied(), color(0).stroke_width(2)))?
            .label(label.split(" (").next().unwrap_or(label))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color(0).stroke_width(2)));
        if i == 0 && !heap.is_empty() {
            // The live part of the RSS: what is left is free memory the allocator still holds.
            c.draw_series(LineSeries::new(heap.iter().copied(), color(1).stroke_width(1)))?
                .label("dlbench heap in use")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color(1).stroke_width(1)));
        }
        c.configure_series_labels().position(SeriesLabelPosition::LowerRight).background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    }
    if !groups.is_empty() {
        let ymax = groups.values().flat_map(|v| v.iter().map(|p| p.1)).fold(1.0, f64::max) * 1.2;
        let mut c = ChartBuilder::on(&panels[2]).margin(10).x_label_area_size(35).y_label_area_size(70).build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
        c.configure_mesh().x_desc("seconds").y_desc("servers PSS (MiB)").x_labels(10).y_label_formatter(&|v| format!("{v:.0}")).draw()?;
        for (i, (g, pts)) in groups.iter().enumerate() {
            let col = color(i + 1);
            c.draw_series(LineSeries::new(pts.iter().copied(), col.stroke_width(2)))?
                .label(g.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
        }
        c.configure_series_labels().position(SeriesLabelPosition::UpperLeft).background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    }
    root.present()?;
    Ok(true)
}

/// Draw every chart that has data into `run_dir/plots/`; returns (title, relative path).
pub fn draw_all(run_dir: &Path, s: &Summary) -> Vec<(String, PathBuf)> {
    let dir = run_dir.join("plots");
    let _ = std::fs::create_dir_all(&dir);
    let mut out = Vec::new();
    let mut try_draw = |title: String, file: String, r: Res<bool>| match r {
        Ok(true) => out.push((title, PathBuf::from("plots").join(file))),
        Ok(false) => {}
        Err(e) => tracing::warn!("plot {file}: {e}"),
    };
    try_draw("Acquire latency by percentile".into(), "latency-spectrum.svg".into(), spectrum(run_dir, s, &dir.join("latency-spectrum.svg")));
    let mut workloads: Vec<&str> = Vec::new();
    for w in s.backends.iter().filter(|b| b.failure.is_none()).flat_map(|b| &b.workloads) {
        if !workloads.contains(&w.name.as_str()) {
            workloads.push(&w.name);
        }
    }
    for w in workloads {
        let f = format!("throughput-{w}.svg");
        try_draw(format!("{w}: throughput over time, every backend"), f.clone(), workload_throughput(s, w, &dir.join(&f)));
    }
    for b in s.backends.iter().filter(|b| b.failure.is_none()) {
        let f = format!("timeline-{}.svg", b.name);
        try_draw(format!("{}: throughput and p99 over time", b.name), f.clone(), over_time(b, &dir.join(&f)));
    }
    try_draw("Availability during faults".into(), "availability.svg".into(), availability(s, &dir.join("availability.svg")));
    let mut workloads: Vec<String> = crate::summary::scaling::curves(s).into_iter().map(|c| c.workload).collect();
    workloads.dedup();
    workloads.sort();
    workloads.dedup();
    for w in workloads {
        let f = format!("scaling-{w}.svg");
        try_draw(format!("{w}: throughput and p99 against clients"), f.clone(), scaling(s, &w, &dir.join(&f)));
    }
    try_draw("Resources over the run".into(), "resources.svg".into(), resources(run_dir, &dir.join("resources.svg")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_files_are_told_apart() {
        assert!(phase_file("redis-hot-key-acquire.hlog", "redis", "hot-key", None));
        assert!(phase_file("redis-hot-key-r3-acquire.hlog", "redis", "hot-key", None));
        assert!(phase_file("redis-hot-key-c8-r0-acquire.hlog", "redis", "hot-key", Some(8)));
        assert!(!phase_file("redis-hot-key-c4-acquire.hlog", "redis", "hot-key", Some(8)));
        assert!(!phase_file("redis-hot-key-2-acquire.hlog", "redis", "hot-key", None), "another workload");
        assert!(!phase_file("redlock-hot-key-acquire.hlog", "redis", "hot-key", None));
    }

    #[test]
    fn percentile_axis_reads_in_nines() {
        assert_eq!(percent_label(&0.0), "0%");
        assert_eq!(percent_label(&1.0), "90%");
        assert_eq!(percent_label(&2.0), "99%");
        assert_eq!(percent_label(&3.0), "99.9%");
    }
}
