//! NATS x3: a JetStream cluster on loopback, from Debian's `nats-server`.

use std::path::Path;
use std::time::Duration;

use super::process::Spec;
use super::NodePlan;

/// The user clients log in as when the cluster requires a password (`dlbench up
/// --password-env`): NATS's `authorization` takes a user and a password.
pub const USER: &str = "dlbench";

pub struct NatsPorts {
    pub client: u16,
    /// The cluster (route) port.
    pub route: u16,
    /// When peers talk through proxies: where the others reach this server's route port.
    pub route_front: Option<u16>,
}

/// Each server's config names its own real ports and the others' route fronts, so every
/// server-to-server connection goes through the proxy of its destination. The cluster
/// advertises the front and no client URLs, so neither routes nor clients learn a real
/// port that would bypass the proxies. JetStream's sync interval is the server's default
/// (2 min): what a NATS user gets. With a password, clients must log in as [`USER`]
/// (routes have their own port and need none).
fn config(store: &Path, me: usize, all: &[NatsPorts], password: Option<&str>) -> String {
    let mine = &all[me];
    let routes: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != me)
        .map(|(_, p)| format!("\"nats-route://127.0.0.1:{}\"", p.route_front.unwrap_or(p.route)))
        .collect();
    let auth = password.map(|pw| format!("authorization {{\n  user: {}\n  password: {}\n}}\n", quoted(USER), quoted(pw))).unwrap_or_default();
    format!(
        "server_name: \"nats-{n}\"\nlisten: \"127.0.0.1:{client}\"\n\
         jetstream {{\n  store_dir: \"{store}\"\n  max_memory_store: 256MB\n  max_file_store: 4GB\n}}\n\
         cluster {{\n  name: \"dlbench\"\n  listen: \"127.0.0.1:{route}\"\n  advertise: \"127.0.0.1:{adv}\"\n  \
         no_advertise: true\n  routes: [{routes}]\n}}\n{auth}",
        n = me + 1,
        client = mine.client,
        store = store.display(),
        route = mine.route,
        adv = mine.route_front.unwrap_or(mine.route),
        routes = routes.join(", "),
    )
}

/// A string for the server's configuration file, quoted and escaped.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// One spec per server; data and configuration go under `dir` (the runtime directory),
/// the log under `logs`. With a password the configuration file is private (it holds it).
pub fn specs(bin: &Path, dir: &Path, logs: &Path, ports: &[NatsPorts], password: Option<&str>) -> std::io::Result<Vec<NodePlan>> {
    let mut out = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let name = format!("nats-{}", i + 1);
        let home = dir.join(&name);
        let data = home.join("data");
        std::fs::create_dir_all(&data)?;
        let conf = home.join("nats.conf");
        super::redis::write_private(&conf, &config(&data, i, ports, password))?;
        let spec = Spec::new(&name, bin, logs.join(&name).join("log")).args(["-c".to_string(), conf.display().to_string()]);
        out.push(NodePlan { spec, client_addr: format!("127.0.0.1:{}", p.client), data, clock_file: None });
    }
    Ok(out)
}

/// The login for `password`: [`USER`] with it.
fn login(password: Option<&str>) -> Option<(&str, &str)> {
    password.map(|p| (USER, p))
}

/// Healthy when every server has JetStream up in a cluster with a meta leader.
pub async fn healthy(endpoints: &[String], password: Option<&str>, within: Duration) -> Result<(), String> {
    for ep in endpoints {
        dlbench_nats::admin::healthy(ep, login(password), within).await?;
    }
    Ok(())
}

pub async fn version(ep: &str, password: Option<&str>, within: Duration) -> Result<String, String> {
    dlbench_nats::admin::version(ep, login(password), within).await
}

/// The server that leads the stream of the bucket of `lock_ttl` (the locks asking for that
/// TTL live there), as `ep` sees it.
pub async fn leader_name(ep: &str, password: Option<&str>, within: Duration, lock_ttl: Duration) -> Result<String, String> {
    dlbench_nats::admin::bucket_leader(ep, &dlbench_nats::bucket_name(lock_ttl), login(password), within).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_name_the_others_fronts_and_never_self() {
        let all = [
            NatsPorts { client: 1, route: 2, route_front: Some(3) },
            NatsPorts { client: 4, route: 5, route_front: Some(6) },
            NatsPorts { client: 7, route: 8, route_front: Some(9) },
        ];
        let c = config(Path::new("/d"), 1, &all, None);
        assert!(c.contains("listen: \"127.0.0.1:4\"") && c.contains("listen: \"127.0.0.1:5\""), "{c}");
        assert!(c.contains("127.0.0.1:3\"") && c.contains("127.0.0.1:9\"") && !c.contains("nats-route://127.0.0.1:6"), "{c}");
        assert!(c.contains("advertise: \"127.0.0.1:6\"") && c.contains("server_name: \"nats-2\""), "{c}");
        assert!(!c.contains("authorization"), "no password, no authorization: {c}");
        let c = config(Path::new("/d"), 1, &all, Some("p\"w"));
        assert!(c.ends_with("authorization {\n  user: \"dlbench\"\n  password: \"p\\\"w\"\n}\n"), "{c}");
    }
}
