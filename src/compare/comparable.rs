//! Whether two runs can be compared: what makes them incomparable (a refusal) and what
//! differs without making them so (a note).

use std::collections::BTreeSet;

use crate::summary::Summary;

/// What a plan is, per phase: the fields both sides must agree on. A field one side's
/// summary does not record (written by an older dlbench) is left out on both sides, and the
/// comparison says so.
fn plan_of(s: &Summary, fields: &Fields) -> BTreeSet<String> {
    let mut p = BTreeSet::new();
    for b in &s.backends {
        for w in &b.workloads {
            let mut x = format!("{} (clients {}, keys {}", w.name, w.clients, w.keys);
            if fields.hold {
                x.push_str(&format!(", hold {}, duration {}s, wait {} ms, warm-up {}s", w.hold, w.duration_s, w.wait_timeout_ms, w.warmup_s));
            }
            if fields.ttl {
                x.push_str(&format!(", ttl {} ms, think {}, keys {}", w.ttl_ms, w.think, w.key_dist));
            }
            if let Some(o) = &w.open_loop {
                x.push_str(&format!(", rate {}/s", o.target_rate));
            }
            x.push(')');
            p.insert(x);
        }
    }
    p
}

/// Which plan fields both sides recorded.
struct Fields {
    hold: bool,
    ttl: bool,
}

fn records_hold(s: &Summary) -> bool {
    s.backends.iter().flat_map(|b| &b.workloads).all(|w| !w.hold.is_empty())
}

fn records_ttl(s: &Summary) -> bool {
    s.backends.iter().flat_map(|b| &b.workloads).all(|w| w.ttl_ms > 0)
}

/// Everything that makes two runs incomparable, each named; empty when they compare. The
/// machine is compared by class (cores, CPU model, memory, OS): a different kernel build or
/// host name is a note ([`notes`]), not a refusal.
pub fn mismatches(base: &Summary, new: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let names = |s: &Summary| {
        let mut v: Vec<String> = s.backends.iter().map(|b| b.name.clone()).collect();
        v.sort();
        v.join(",")
    };
    let mut differ = |what: &str, b: String, n: String| {
        if b != n {
            out.push(format!("{what} ({b} vs {n})"));
        }
    };
    differ("backends", names(base), names(new));
    differ("target", base.target.clone(), new.target.clone());
    // Per-client and shared connections measure different things (N processes against one
    // multiplexed process); summaries written before the mode was recorded have none.
    let conns = |s: &Summary| {
        s.backends.iter().filter_map(|b| Some(format!("{} {}", b.name, b.connections.as_ref()?))).collect::<Vec<_>>().join(", ")
    };
    let (cb, cn) = (conns(base), conns(new));
    if !cb.is_empty() && !cn.is_empty() {
        differ("connections", cb, cn);
    }
    // The servers' durability settings (recorded since `run --durability`; older summaries
    // ran the local target's default and record none, so they are not compared).
    let durability = |s: &Summary| s.backends.iter().filter_map(|b| Some(format!("{} {}", b.name, b.durability.as_ref()?.label))).collect::<Vec<_>>().join(", ");
    let (db, dn) = (durability(base), durability(new));
    if !db.is_empty() && !dn.is_empty() {
        differ("durability", db, dn);
    }
    let state = |s: &Summary| if s.complete { "complete" } else { "interrupted" }.to_string();
    differ("completeness", state(base), state(new));
    // The fenced side is what the verdict rows speak for.
    let fencing = |s: &Summary| format!("{:?}", s.fencing).to_lowercase();
    differ("fencing mode", fencing(base), fencing(new));
    let faults = |s: &Summary| if s.nemesis_schedule.is_empty() { "none".to_string() } else { s.nemesis_schedule.join(",") };
    differ("fault schedule", faults(base), faults(new));
    if base.nemesis_interval_s.is_some() && new.nemesis_interval_s.is_some() {
        let i = |s: &Summary| format!("{}s", s.nemesis_interval_s.unwrap_or(0.0));
        differ("fault interval", i(base), i(new));
    }
    let resource = |s: &Summary| s.resource_server.clone().unwrap_or_else(|| "in process".into());
    differ("protected resource", resource(base), resource(new));
    let fields = Fields { hold: records_hold(base) && records_hold(new), ttl: records_ttl(base) && records_ttl(new) };
    let (pb, pn) = (plan_of(base, &fields), plan_of(new, &fields));
    if pb != pn {
        let only = |a: &BTreeSet<String>, b: &BTreeSet<String>| a.difference(b).cloned().collect::<Vec<_>>().join("; ");
        differ("plan", format!("base has {}", or_none(only(&pb, &pn))), format!("new has {}", or_none(only(&pn, &pb))));
    }
    // The plan's settings recorded nowhere else (run/settings.rs): each one that differs
    // is named (a setting only one side recorded is a note).
    for (k, b) in &base.plan_settings {
        if let Some(n) = new.plan_settings.get(k) {
            differ(k, b.clone(), n.clone());
        }
    }
    let (mb, mn) = (&base.machine, &new.machine);
    differ("machine cores", mb.cores.to_string(), mn.cores.to_string());
    differ("machine CPU", mb.cpu_model.clone(), mn.cpu_model.clone());
    // Memory by the GiB: two machines of one kind report a few MB apart.
    let gib = |m: &crate::facts::Machine| format!("{} GiB", (m.memory_mb as f64 / 1024.0).round());
    differ("machine memory", gib(mb), gib(mn));
    differ("machine OS", mb.os.clone(), mn.os.clone());
    out
}

/// What differs between two comparable runs without making them incomparable: the kernel
/// build and the host name of machines of one class, plan fields one side did not record.
pub fn notes(base: &Summary, new: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let (mb, mn) = (&base.machine, &new.machine);
    if mb.kernel != mn.kernel {
        out.push(format!("kernel build {} vs {} (same machine class)", mb.kernel, mn.kernel));
    }
    if mb.hostname != mn.hostname {
        out.push(format!("host {} vs {}", mb.hostname, mn.hostname));
    }
    if !(records_hold(base) && records_hold(new)) {
        out.push("hold, duration, wait and warm-up not compared: one side's summary does not record them".into());
    }
    if !(records_ttl(base) && records_ttl(new)) {
        out.push("TTL, think time and key distribution not compared: one side's summary does not record them".into());
    }
    let settings = |a: &Summary, b: &Summary| a.plan_settings.keys().filter(|k| !b.plan_settings.contains_key(*k)).cloned().collect::<Vec<_>>();
    match (base.plan_settings.is_empty(), new.plan_settings.is_empty()) {
        (true, true) => out.push("history mode, request timeout, shard, retry interval, ops limit and zipf exponent not compared: neither summary records them (written before dlbench recorded its plan settings)".into()),
        (true, false) | (false, true) => out.push("history mode, request timeout, shard, retry interval, ops limit and zipf exponent not compared: one side's summary does not record them".into()),
        (false, false) => {
            let only: Vec<String> = settings(base, new).into_iter().chain(settings(new, base)).collect();
            if !only.is_empty() {
                out.push(format!("{} not compared: recorded on one side only", only.join(", ")));
            }
        }
    }
    if base.nemesis_interval_s.is_some() != new.nemesis_interval_s.is_some() && !base.nemesis_schedule.is_empty() {
        out.push("fault interval not compared: one side's summary does not record it".into());
    }
    match (&base.dlbench_commit, &new.dlbench_commit) {
        (Some(b), Some(n)) if b == n => out.push(format!("both sides built from {}", &b[..b.len().min(12)])),
        _ => {}
    }
    out
}

fn or_none(s: String) -> String {
    if s.is_empty() { "nothing else".into() } else { s }
}
