//! The protected resource in its own server (`--resource redis://...` or `postgres://...`):
//! one place that sees every holder, for load spread over several hosts.
//!
//! In-process, the resource ([`dlbench_core::Resource`]) shares one clock and one memory with
//! every client, so an overlap is exact. Shards on several hosts cannot share that; what they
//! can share is a server. Here each cell is a Redis hash (or a PostgreSQL row), and each step
//! of a critical section (enter, read, write, exit) is one Lua script run atomically by the
//! server (or one PL/pgSQL call on the row locked `FOR UPDATE`), stamped with the server's
//! clock (`TIME`, `clock_timestamp()`): the same rules as the in-process resource (a plain and a fenced
//! register, overlaps from the count of sections inside, lost updates from the counter,
//! stale / legitimate refusals and token inversions from the highest tokens), applied in the
//! server's one order. No client clock enters a judgment.
//!
//! The server must be a dedicated one, never a lock server under test: a fault or a FLUSHALL
//! aimed at the lock would hit the evidence too. Its cells are named after the plan
//! (`dlbench:resource:<scope>:<key>`) and expire an hour after their last step, so nothing
//! is left behind for long and a later run of the same plan starts from empty cells.
//!
//! Each process tallies the sections it ran (the server decided every flag), so the tallies
//! of several shards add up; the time some holder was inside is each section's own
//! server-stamped span, summed.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dlbench_core::{CellStats, FencingToken, Lease, ResourceStats, SectionRecord};
use redis::aio::MultiplexedConnection;

/// One script for the four steps, so the server loads it once.
const STEP: &str = r#"
local c = KEYS[1]
local op = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function num(f) return tonumber(redis.call('HGET', c, f) or '0') end
-- Present a token: stale when below the highest presented, or equal to it from another
-- section; a refusal caused by an earlier section while the lease was valid is legitimate.
local function present(tok, rank, lease_lost)
  if tok == '' then return 0, 0 end
  local v = tonumber(tok)
  local mt = redis.call('HGET', c, 'max_token')
  if mt then
    local m = tonumber(mt)
    local mr = num('max_token_rank')
    if v < m or (v == m and mr ~= rank) then
      if mr < rank and lease_lost == '0' then return 1, 1 end
      return 1, 0
    end
  end
  redis.call('HSET', c, 'max_token', tok, 'max_token_rank', rank)
  return 0, 0
end
local out
if op == 'enter' then
  local tok, valid = ARGV[2], ARGV[3]
  local rank = redis.call('HINCRBY', c, 'entered', 1)
  local inside = redis.call('HINCRBY', c, 'inside', 1)
  local inversion = 0
  if tok ~= '' then
    local v = tonumber(tok)
    local me = redis.call('HGET', c, 'max_entered')
    if valid == '1' and me and v <= tonumber(me) then inversion = 1 end
    if (not me) or v > tonumber(me) then redis.call('HSET', c, 'max_entered', tok) end
  end
  out = {rank, now, inside > 1 and 1 or 0, inversion}
elseif op == 'read' then
  local stale, legit = present(ARGV[2], tonumber(ARGV[3]), ARGV[4])
  local seq = redis.call('HINCRBY', c, 'seq', 1)
  local fr = -1
  if stale == 0 then fr = num('fenced') end
  out = {seq, num('plain'), stale, legit, fr}
elseif op == 'write' then
  local stale, legit = present(ARGV[2], tonumber(ARGV[3]), ARGV[4])
  local read, fr = tonumber(ARGV[5]), tonumber(ARGV[6])
  local seq = redis.call('HINCRBY', c, 'seq', 1)
  local lost = 0
  if num('plain') ~= read then lost = 1 end
  redis.call('HSET', c, 'plain', read + 1)
  local lostf = 0
  if stale == 0 and fr >= 0 then
    if num('fenced') ~= fr then lostf = 1 end
    redis.call('HSET', c, 'fenced', fr + 1)
  end
  out = {seq, lost, lostf, stale, legit}
elseif op == 'exit' then
  redis.call('HINCRBY', c, 'inside', -1)
  out = {now}
elseif op == 'counter' then
  out = {num('plain')}
else
  return redis.error_reply('unknown step ' .. op)
end
redis.call('PEXPIRE', c, 3600000)
return out
"#;

/// Bound on one step: a resource server that does not answer stops the run rather than
/// leaving a hole in the evidence.
const STEP_TIMEOUT: Duration = Duration::from_secs(5);

/// The clock of this host against the resource server's, from the round trip with the least
/// delay (NTP's rule): `offset_ms` is server minus local, `rtt_ms` bounds its error (± half).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct ClockOffset {
    pub offset_ms: f64,
    pub rtt_ms: f64,
}

/// `redis://host:port[/db]`, checked before anything is created; a password comes from
/// `DLBENCH_RESOURCE_PASSWORD`, never from the URL (command lines are recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceUrl {
    url: String,
}

impl ResourceUrl {
    /// Parse `--resource`: `local` is `None`.
    pub fn parse(s: &str) -> Result<Option<Self>, String> {
        let s = s.trim();
        if s.is_empty() || s == "local" {
            return Ok(None);
        }
        let (scheme, rest) = match s.split_once("://") {
            Some((sc @ ("redis" | "postgres" | "postgresql"), rest)) => (sc, rest),
            _ => {
                return Err(format!(
                    "--resource {}: expected local, redis://HOST:PORT[/DB] or postgres://[USER@]HOST:PORT/DB (a dedicated server, not a lock server under test)",
                    redact(s)
                ))
            }
        };
        let (userinfo, hostpart) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, rest),
        };
        let host = hostpart.split('/').next().unwrap_or("");
        let name = host.rsplit_once(':').map_or(host, |(h, _)| h);
        if name.is_empty() {
            return Err(format!("--resource {}: no host", redact(s)));
        }
        if userinfo.is_some_and(|u| u.contains(':')) {
            // The command line is recorded in summary.json and visible in `ps`.
            return Err(format!("--resource {}: put the password in DLBENCH_RESOURCE_PASSWORD, not in the URL", redact(s)));
        }
        let pw = std::env::var("DLBENCH_RESOURCE_PASSWORD").ok().filter(|p| !p.is_empty());
        let url = match (scheme, pw) {
            ("redis", Some(pw)) => format!("redis://{}:{pw}@{hostpart}", userinfo.unwrap_or("")),
            (_, Some(pw)) => format!("postgres://{}:{pw}@{hostpart}", userinfo.unwrap_or("postgres")),
            _ => s.to_string(),
        };
        if scheme == "redis" {
            redis::Client::open(url.as_str()).map_err(|e| format!("--resource {}: {e}", redact(s)))?;
        } else {
            url.parse::<sqlx::postgres::PgConnectOptions>().map_err(|e| format!("--resource {}: {e}", redact(s)))?;
        }
        Ok(Some(ResourceUrl { url }))
    }

    fn is_postgres(&self) -> bool {
        !self.url.starts_with("redis://")
    }

    /// The URL without its credentials: what logs and result files may show.
    pub fn shown(&self) -> String {
        redact(&self.url)
    }

    /// The host part, for the loopback-or-project-network rule the endpoints follow.
    pub fn host(&self) -> String {
        let rest = self.url.split_once("://").map_or(self.url.as_str(), |(_, r)| r);
        let host = rest.rsplit('@').next().unwrap_or(rest).split('/').next().unwrap_or("");
        host.rsplit_once(':').map_or(host, |(h, _)| h).trim_matches(['[', ']']).to_string()
    }
}

/// A plan shows the URL without its credentials.
impl serde::Serialize for ResourceUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.shown())
    }
}

/// `redis://user:secret@host` → `redis://host` (a user without a password stays).
fn redact(s: &str) -> String {
    match (s.find("://"), s.rfind('@')) {
        (Some(i), Some(j)) if j > i => match s[i + 3..j].split(':').next().unwrap_or("") {
            "" => format!("{}{}", &s[..i + 3], &s[j + 1..]),
            user => format!("{}{user}@{}", &s[..i + 3], &s[j + 1..]),
        },
        _ => s.to_string(),
    }
}

/// The resource on a server: cells `dlbench:resource:<scope>:<key index>` (Redis hashes, or
/// rows of `dlbench_resource` on PostgreSQL).
pub struct ServerResource {
    store: Store,
    prefix: String,
    keys: usize,
    shown: String,
    /// This process's sections' tallies, per key.
    tallies: Mutex<Vec<CellStats>>,
    /// Summed span of this process's sections (server µs), per key.
    inside_us: Mutex<Vec<u64>>,
    /// The server's Unix µs at the local epoch's instant, from the offset measured at open.
    server_epoch_us: i64,
    epoch: Instant,
    pub clock: ClockOffset,
}

/// Where the cells are.
enum Store {
    Redis { conn: MultiplexedConnection, script: redis::Script },
    Postgres { pool: sqlx::PgPool },
}

/// The same steps as [`STEP`] for PostgreSQL: one row per cell, locked for the step
/// (`FOR UPDATE`), stamped with `clock_timestamp()`. Arguments as the script's after the op.
const PG_SETUP: &str = r#"
CREATE TABLE IF NOT EXISTS dlbench_resource (
  cell text PRIMARY KEY, plain bigint NOT NULL DEFAULT 0, fenced bigint NOT NULL DEFAULT 0,
  seq bigint NOT NULL DEFAULT 0, inside bigint NOT NULL DEFAULT 0, entered bigint NOT NULL DEFAULT 0,
  max_token numeric, max_token_rank bigint, max_entered numeric,
  touched timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE OR REPLACE FUNCTION dlbench_resource_step(c text, op text, a text[]) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  r dlbench_resource%ROWTYPE;
  now_us bigint := (extract(epoch from clock_timestamp()) * 1000000)::bigint;
  stale bigint := 0; legit bigint := 0; tok numeric; rnk bigint; o bigint[];
BEGIN
  INSERT INTO dlbench_resource(cell) VALUES (c) ON CONFLICT DO NOTHING;
  SELECT * INTO r FROM dlbench_resource WHERE cell = c FOR UPDATE;
  IF op = 'enter' THEN
    r.entered := r.entered + 1; r.inside := r.inside + 1;
    tok := NULLIF(a[1], '')::numeric;
    o := ARRAY[r.entered, now_us, CASE WHEN r.inside > 1 THEN 1 ELSE 0 END, 0];
    IF tok IS NOT NULL THEN
      IF a[2] = '1' AND r.max_entered IS NOT NULL AND tok <= r.max_entered THEN o[4] := 1; END IF;
      IF r.max_entered IS NULL OR tok > r.max_entered THEN r.max_entered := tok; END IF;
    END IF;
  ELSIF op = 'read' OR op = 'write' THEN
    tok := NULLIF(a[1], '')::numeric; rnk := a[2]::bigint;
    IF tok IS NOT NULL THEN
      IF r.max_token IS NOT NULL AND (tok < r.max_token OR (tok = r.max_token AND r.max_token_rank <> rnk)) THEN
        stale := 1;
        IF r.max_token_rank < rnk AND a[3] = '0' THEN legit := 1; END IF;
      ELSE
        r.max_token := tok; r.max_token_rank := rnk;
      END IF;
    END IF;
    r.seq := r.seq + 1;
    IF op = 'read' THEN
      o := ARRAY[r.seq, r.plain, stale, legit, CASE WHEN stale = 0 THEN r.fenced ELSE -1 END];
    ELSE
      o := ARRAY[r.seq, CASE WHEN r.plain <> a[4]::bigint THEN 1 ELSE 0 END, 0, stale, legit];
      r.plain := a[4]::bigint + 1;
      IF stale = 0 AND a[5]::bigint >= 0 THEN
        IF r.fenced <> a[5]::bigint THEN o[3] := 1; END IF;
        r.fenced := a[5]::bigint + 1;
      END IF;
    END IF;
  ELSIF op = 'exit' THEN
    r.inside := r.inside - 1; o := ARRAY[now_us];
  ELSIF op = 'counter' THEN
    o := ARRAY[r.plain];
  ELSE
    RAISE EXCEPTION 'unknown step %', op;
  END IF;
  UPDATE dlbench_resource SET plain = r.plain, fenced = r.fenced, seq = r.seq, inside = r.inside,
    entered = r.entered, max_token = r.max_token, max_token_rank = r.max_token_rank,
    max_entered = r.max_entered, touched = clock_timestamp() WHERE cell = c;
  RETURN o;
END $$;
"#;

/// A step's reply: the integers the script returned.
type Reply = Vec<i64>;

impl ServerResource {
    /// Connect, measure the clock offset, and name the cells after `scope` (shared by every
    /// shard of a plan). `epoch` is the instant the history's times count from.
    pub async fn open(url: &ResourceUrl, scope: &str, keys: usize, epoch: Instant) -> anyhow::Result<Self> {
        let shown = url.shown();
        let within = |what: &'static str| move |_| anyhow::anyhow!("resource server {}: {what} within {STEP_TIMEOUT:?} (is it running?)", url.shown());
        let (store, clock) = if url.is_postgres() {
            let opts: sqlx::postgres::PgConnectOptions = url.url.parse().map_err(|e| anyhow::anyhow!("resource server {shown}: {e}"))?;
            let pool = tokio::time::timeout(STEP_TIMEOUT, sqlx::postgres::PgPoolOptions::new().max_connections(16).connect_with(opts))
                .await
                .map_err(within("no connection"))?
                .map_err(|e| anyhow::anyhow!("resource server {shown}: {e}"))?;
            // Shards set up at once: one at a time (CREATE OR REPLACE races otherwise);
            // cells untouched for an hour go, as Redis's expire them.
            let setup = async {
                let mut tx = pool.begin().await?;
                sqlx::query("SELECT pg_advisory_xact_lock(7436521)").execute(&mut *tx).await?;
                sqlx::raw_sql(PG_SETUP).execute(&mut *tx).await?;
                sqlx::query("DELETE FROM dlbench_resource WHERE touched < clock_timestamp() - interval '1 hour'").execute(&mut *tx).await?;
                tx.commit().await
            };
            tokio::time::timeout(STEP_TIMEOUT, setup).await.map_err(within("no set-up"))?.map_err(|e| anyhow::anyhow!("resource server {shown}: {e}"))?;
            let clock = measure_clock(|| async {
                let us: i64 = sqlx::query_scalar("SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint").fetch_one(&pool).await?;
                Ok(us)
            })
            .await
            .map_err(|e| anyhow::anyhow!("resource server {shown}: {e}"))?;
            (Store::Postgres { pool }, clock)
        } else {
            let client = redis::Client::open(url.url.as_str()).map_err(|e| anyhow::anyhow!("resource server {shown}: {e}"))?;
            let conn = tokio::time::timeout(STEP_TIMEOUT, client.get_multiplexed_async_connection())
                .await
                .map_err(within("no connection"))?
                .map_err(|e| anyhow::anyhow!("resource server {shown}: {e}"))?;
            let clock = measure_clock(|| {
                let mut c = conn.clone();
                async move {
                    let (s, us): (i64, i64) = redis::cmd("TIME").query_async(&mut c).await?;
                    Ok(s * 1_000_000 + us)
                }
            })
            .await
            .map_err(|e| anyhow::anyhow!("resource server {shown}: {e}"))?;
            (Store::Redis { conn, script: redis::Script::new(STEP) }, clock)
        };
        let now_local_us = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as i64;
        let server_now_us = now_local_us + (clock.offset_ms * 1000.0) as i64;
        let server_epoch_us = server_now_us - epoch.elapsed().as_micros() as i64;
        Ok(ServerResource {
            store,
            prefix: format!("dlbench:resource:{scope}"),
            keys: keys.max(1),
            shown,
            tallies: Mutex::new(vec![CellStats::default(); keys.max(1)]),
            inside_us: Mutex::new(vec![0; keys.max(1)]),
            server_epoch_us,
            epoch,
            clock,
        })
    }

    pub fn shown(&self) -> &str {
        &self.shown
    }

    async fn step(&self, key: usize, args: &[String]) -> anyhow::Result<Reply> {
        let cell = format!("{}:{key}", self.prefix);
        let r: Result<Result<Reply, anyhow::Error>, _> = match &self.store {
            Store::Redis { conn, script } => {
                let mut conn = conn.clone();
                let mut inv = script.key(cell);
                for a in args {
                    inv.arg(a);
                }
                tokio::time::timeout(STEP_TIMEOUT, async move { inv.invoke_async::<Reply>(&mut conn).await.map_err(anyhow::Error::from) }).await
            }
            Store::Postgres { pool } => {
                let q = sqlx::query_scalar::<_, Vec<i64>>("SELECT dlbench_resource_step($1, $2, $3)").bind(cell).bind(&args[0]).bind(args[1..].to_vec());
                tokio::time::timeout(STEP_TIMEOUT, async move { q.fetch_one(pool).await.map_err(anyhow::Error::from) }).await
            }
        };
        r.map_err(|_| anyhow::anyhow!("resource server {}: no answer within {STEP_TIMEOUT:?}", self.shown))?
            .map_err(|e| anyhow::anyhow!("resource server {}: {e}", self.shown))
    }

    /// Server µs → ns since the local epoch (the history's time base).
    fn local_ns(&self, server_us: i64) -> u64 {
        ((server_us - self.server_epoch_us).max(0) as u64) * 1000
    }

    /// One critical section as the holder of `lease` on key `key`: enter, read, hold, write
    /// the counter back plus one, exit. Every flag in the record is the server's.
    pub async fn section(&self, key: usize, lease: &Lease, hold: Duration) -> anyhow::Result<SectionRecord> {
        self.section_as(key, lease.token, !lease.is_lost(), hold).await
    }

    /// The same with an explicit token and lease validity (as `Resource::enter_as`).
    pub async fn section_as(&self, key: usize, token: Option<FencingToken>, lease_valid: bool, hold: Duration) -> anyhow::Result<SectionRecord> {
        let token = token.map(|t| t.0);
        let tok = token.map(|t| t.to_string()).unwrap_or_default();
        let lease_lost = !lease_valid;
        let mut rec = SectionRecord { key, token, lease_lost, ..Default::default() };
        let e = self.step(key, &["enter".into(), tok.clone(), if lease_lost { "0" } else { "1" }.into()]).await?;
        let (rank, enter_us) = (e[0], e[1]);
        rec.enter_ns = self.local_ns(enter_us);
        rec.overlapped = e[2] == 1;
        rec.inversion = e[3] == 1;
        let lost = if lease_lost { "1" } else { "0" };
        let r = self.step(key, &["read".into(), tok.clone(), rank.to_string(), lost.into()]).await?;
        rec.read_seq = Some(r[0] as u64);
        rec.read_value = Some(r[1] as u64);
        let stale = |rec: &mut SectionRecord, s: i64, legit: i64| {
            if s == 1 {
                rec.rejected = true;
                if !rec.stale {
                    rec.stale = true;
                    rec.legit_refused = legit == 1;
                }
            }
        };
        stale(&mut rec, r[2], r[3]);
        let fenced_read = r[4];
        if hold.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(hold).await;
        }
        let w = self
            .step(key, &["write".into(), tok, rank.to_string(), lost.into(), r[1].to_string(), fenced_read.to_string()])
            .await?;
        rec.write_seq = Some(w[0] as u64);
        rec.lost_update = w[1] == 1;
        rec.lost_update_fenced = w[2] == 1;
        stale(&mut rec, w[3], w[4]);
        let x = self.step(key, &["exit".into()]).await?;
        rec.exit_ns = self.local_ns(x[0]);
        self.tally(&rec, (x[0] - enter_us).max(0) as u64);
        Ok(rec)
    }

    fn tally(&self, rec: &SectionRecord, inside_us: u64) {
        let mut t = self.tallies.lock().unwrap();
        let s = &mut t[rec.key];
        s.sections += 1;
        s.overlaps += rec.overlapped as u64;
        s.lost_updates += rec.lost_update as u64;
        s.lost_updates_fenced += rec.lost_update_fenced as u64;
        s.stale_tokens += rec.stale as u64;
        s.rejected += rec.rejected as u64;
        s.legit_refused += rec.legit_refused as u64;
        s.token_inversions += rec.inversion as u64;
        s.entered_expired += rec.lease_lost as u64;
        s.writes += rec.write_seq.is_some() as u64;
        self.inside_us.lock().unwrap()[rec.key] += inside_us;
    }

    /// This process's tallies, with the cells' counters as the server holds them now (shared
    /// by every shard: the merge takes the last, not the sum).
    pub async fn stats(&self) -> ResourceStats {
        let mut counter_sum = 0;
        for k in 0..self.keys {
            if let Ok(r) = self.step(k, &["counter".into()]).await {
                counter_sum += r[0] as u64;
            }
        }
        let t = self.tallies.lock().unwrap().clone();
        let inside = self.inside_us.lock().unwrap().clone();
        let mut out = ResourceStats { keys: self.keys as u64, elapsed_ns: self.epoch.elapsed().as_nanos() as u64, counter_sum, ..Default::default() };
        for (s, us) in t.iter().zip(&inside) {
            out.total.add(s);
            out.busy_ns += us * 1000;
            out.busiest_key_ns = out.busiest_key_ns.max(us * 1000);
        }
        out
    }
}

/// Eight reads of the server's clock (Unix µs); the one with the least delay gives the offset.
async fn measure_clock<F, Fut>(mut read: F) -> anyhow::Result<ClockOffset>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<i64>>,
{
    let mut best: BTreeMap<u64, f64> = BTreeMap::new();
    for _ in 0..8 {
        let t0 = SystemTime::now();
        let server_us = tokio::time::timeout(STEP_TIMEOUT, read()).await.map_err(|_| anyhow::anyhow!("no clock reading within {STEP_TIMEOUT:?}"))??;
        let t1 = SystemTime::now();
        let rtt = t1.duration_since(t0).unwrap_or_default();
        let mid = t0.duration_since(UNIX_EPOCH).unwrap_or_default() + rtt / 2;
        let offset_ms = (server_us as f64 - mid.as_micros() as f64) / 1000.0;
        best.insert(rtt.as_nanos() as u64, offset_ms);
    }
    let (rtt, offset_ms) = best.into_iter().next().expect("eight samples");
    Ok(ClockOffset { offset_ms, rtt_ms: rtt as f64 / 1e6 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_is_checked_and_never_shown_with_its_password() {
        assert_eq!(ResourceUrl::parse("local").unwrap(), None);
        let u = ResourceUrl::parse("redis://127.0.0.1:16390/2").unwrap().unwrap();
        assert_eq!(u.shown(), "redis://127.0.0.1:16390/2");
        assert_eq!(u.host(), "127.0.0.1");
        assert_eq!(redact("redis://:s3cret@resource:6379"), "redis://resource:6379");
        let p = ResourceUrl::parse("postgres://postgres@127.0.0.1:15432/postgres").unwrap().unwrap();
        assert_eq!((p.shown().as_str(), p.host().as_str()), ("postgres://postgres@127.0.0.1:15432/postgres", "127.0.0.1"));
        assert_eq!(redact("postgres://bench:s3cret@db:5432/x"), "postgres://bench@db:5432/x");
        for bad in ["http://x", "redis://", "127.0.0.1:6379", "redis://:s3cret@127.0.0.1:6379", "postgres://u:s3cret@127.0.0.1/x"] {
            let e = ResourceUrl::parse(bad).unwrap_err();
            assert!(e.starts_with("--resource") && !e.contains('\n') && !e.contains("s3cret"), "{bad}: {e}");
        }
    }
}
