//! The `docker` command, and the container this dlbench runs in when it runs inside the
//! project network.

use std::time::Duration;

use super::INSIDE_VAR;

pub(super) async fn docker(args: &[&str]) -> Result<String, String> {
    let out = tokio::time::timeout(Duration::from_secs(60), tokio::process::Command::new("docker").args(args).output())
        .await
        .map_err(|_| format!("docker {} did not finish within 60 s", args.join(" ")))?
        .map_err(|e| format!("cannot run docker: {e} (install Docker Engine)"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!("docker {}: {}", args.join(" "), err.lines().next().unwrap_or("").trim()))
    }
}

pub(super) fn inside() -> bool {
    std::env::var(INSIDE_VAR).is_ok_and(|v| v == "1")
}

/// Inside the bench container: its own container (Docker sets the hostname to the id).
pub(super) fn own_container() -> Result<String, String> {
    std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).map_err(|e| format!("cannot read /etc/hostname: {e}"))
}

/// Inside the bench container: the compose project it belongs to, from its own labels.
pub(super) async fn own_project() -> Result<String, String> {
    let host = own_container()?;
    let p = docker(&["inspect", "--format", "{{index .Config.Labels \"com.docker.compose.project\"}}", &host]).await?;
    let p = p.trim().to_string();
    if p.is_empty() {
        return Err(format!("{INSIDE_VAR}=1, but container {} has no compose project label: run it as `docker compose run --rm bench ...`", host));
    }
    Ok(p)
}

/// Run `script` in the container with `$dev` set to its network interface (the one its
/// default route uses), for tc.
pub(super) async fn in_container(container: &str, script: &str) -> Result<String, String> {
    let full = format!("dev=$(ip -o -4 route show to default | awk '{{print $5; exit}}'); [ -n \"$dev\" ] || dev=eth0; {script}");
    docker(&["exec", container, "sh", "-c", &full]).await.map_err(|e| {
        if e.contains("not found") {
            format!("{e} (the image has no tc: rebuild it, `docker compose build`, which installs iproute2)")
        } else if e.contains("Operation not permitted") {
            format!("{e} (tc needs cap_add: [NET_ADMIN], as docker-compose.yml gives every server)")
        } else {
            e
        }
    })
}
