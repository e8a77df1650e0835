//! Adaptive timeouts, as Lustre's ptlrpc keeps them (`obd_at_measure`, `at_est2timeout`,
//! early replies).
//!
//! A fixed deadline is either too short for a busy server, whose slow but healthy requests
//! are then timed out, resent and run again, or too long for a dead one. So each server
//! keeps an estimate of its service time (the worst of the last `at_history` seconds, in
//! [`AT_BINS`] bins) and sends it with every reply; a client sets each request's deadline
//! from its target's estimate plus the network latency it measured, and sends that
//! deadline with the request. A server still working on a request near its deadline asks
//! the client for more time with an early reply, at most up to `at_max` seconds after the
//! request came in. Times are whole seconds, as Lustre's are, since they go between nodes.
//!
//! The tunables are per process, as Lustre's are module parameters of a node: `at_min`,
//! `at_max` (0 turns adaptive timeouts off: every request then waits `timeout`),
//! `at_history`, `at_early_margin`, `at_extra` and `timeout`, set with `lctl set_param`.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// History bins of an estimate (Lustre's `AT_BINS`): the estimate is the worst value of
/// the last `at_history` seconds, kept as the worst of each quarter.
pub const AT_BINS: usize = 4;
/// Lustre's default `at_min`: no floor under an estimate.
pub const DEFAULT_AT_MIN: u32 = 0;
/// Lustre's default `at_max`: no request is given more than 10 minutes.
pub const DEFAULT_AT_MAX: u32 = 600;
/// Lustre's default `at_history`: seconds an estimate remembers a slow request.
pub const DEFAULT_AT_HISTORY: u32 = 600;
/// Lustre's default `at_early_margin`: an early reply goes this long before a deadline.
pub const DEFAULT_AT_EARLY_MARGIN: u32 = 5;
/// Lustre's default `at_extra`: what one early reply asks for.
pub const DEFAULT_AT_EXTRA: u32 = 30;
/// Default `timeout` (Lustre's `obd_timeout`), the deadline of a request while adaptive
/// timeouts are off. nacre's is 30 s rather than Lustre's 100: its recovery windows are
/// built on shorter times (`nacre_mdt::recovery`).
pub const DEFAULT_OBD_TIMEOUT: u32 = 30;
/// Largest value of any of these tunables: the wire carries seconds in 16 bits (about
/// 18 hours).
pub const TUNABLE_MAX: u32 = u16::MAX as u32;
/// A client's service estimate before its target first answered (Lustre's
/// `INITIAL_CONNECT_TIMEOUT` at the default `obd_timeout`).
pub const INITIAL_CLIENT_ESTIMATE: u32 = 5;
/// A server's service estimate before it measured a request (Lustre's `at_init(.., 10)`).
pub const INITIAL_SERVICE_ESTIMATE: u32 = 10;

/// The deadline for a request whose service is estimated at `est` seconds: 125% plus 5 s
/// (Lustre's `at_est2timeout`).
pub fn est_to_timeout(est: u32) -> u32 {
    est.saturating_add(est >> 2).saturating_add(5)
}

/// The adaptive timeout tunables of one process.
#[derive(Debug)]
pub struct AtTunables {
    min: AtomicU32,
    max: AtomicU32,
    history: AtomicU32,
    early_margin: AtomicU32,
    extra: AtomicU32,
    timeout: AtomicU32,
}

/// The tunables as one request sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtParams {
    pub min: u32,
    pub max: u32,
    pub history: u32,
    pub early_margin: u32,
    pub extra: u32,
    pub timeout: u32,
}

impl AtParams {
    /// Whether adaptive timeouts are off (`at_max=0`), as Lustre's `AT_OFF`.
    pub fn off(&self) -> bool {
        self.max == 0
    }

    /// The deadline of a request while adaptive timeouts are off.
    pub fn fixed_timeout(&self) -> Duration {
        Duration::from_secs(u64::from(self.timeout.max(1)))
    }
}

/// This process's tunables.
pub static AT: AtTunables = AtTunables::new();

/// The tunables' names, in the order `lctl` lists them.
pub const NAMES: [&str; 6] = [
    "at_early_margin",
    "at_extra",
    "at_history",
    "at_max",
    "at_min",
    "timeout",
];

impl AtTunables {
    pub const fn new() -> AtTunables {
        AtTunables {
            min: AtomicU32::new(DEFAULT_AT_MIN),
            max: AtomicU32::new(DEFAULT_AT_MAX),
            history: AtomicU32::new(DEFAULT_AT_HISTORY),
            early_margin: AtomicU32::new(DEFAULT_AT_EARLY_MARGIN),
            extra: AtomicU32::new(DEFAULT_AT_EXTRA),
            timeout: AtomicU32::new(DEFAULT_OBD_TIMEOUT),
        }
    }

    pub fn params(&self) -> AtParams {
        AtParams {
            min: self.min.load(Ordering::Relaxed),
            max: self.max.load(Ordering::Relaxed),
            history: self.history.load(Ordering::Relaxed),
            early_margin: self.early_margin.load(Ordering::Relaxed),
            extra: self.extra.load(Ordering::Relaxed),
            timeout: self.timeout.load(Ordering::Relaxed),
        }
    }

    fn slot(&self, name: &str) -> Option<&AtomicU32> {
        Some(match name {
            "at_min" => &self.min,
            "at_max" => &self.max,
            "at_history" => &self.history,
            "at_early_margin" => &self.early_margin,
            "at_extra" => &self.extra,
            "timeout" => &self.timeout,
            _ => return None,
        })
    }

    /// One tunable's value, by its `lctl` name.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.slot(name).map(|s| s.load(Ordering::Relaxed))
    }

    /// Sets one tunable, with the bounds Lustre's module parameters have: `at_min` at most
    /// `at_max` (unless that is 0, off), `at_history` and `timeout` at least 1, and
    /// `at_extra` at least 1 so an early reply always adds time.
    pub fn set(&self, name: &str, value: &str) -> Result<(), String> {
        let slot = self
            .slot(name)
            .ok_or_else(|| format!("{name}: no such adaptive timeout parameter"))?;
        let v: u32 = value
            .trim()
            .parse()
            .map_err(|_| format!("{name}: '{value}' is not a number of seconds"))?;
        if v > TUNABLE_MAX {
            return Err(format!("{name}: {v} is above {TUNABLE_MAX} seconds"));
        }
        let p = self.params();
        match name {
            "at_min" if p.max != 0 && v > p.max => {
                return Err(format!("at_min: {v} is above at_max ({})", p.max));
            }
            "at_max" if v != 0 && v < p.min => {
                return Err(format!("at_max: {v} is below at_min ({})", p.min));
            }
            "at_history" | "timeout" | "at_extra" if v == 0 => {
                return Err(format!("{name}: must be at least 1 second"));
            }
            _ => {}
        }
        slot.store(v, Ordering::Relaxed);
        Ok(())
    }
}

impl Default for AtTunables {
    fn default() -> Self {
        AtTunables::new()
    }
}

/// Seconds since the epoch, as Lustre's `ktime_get_real_seconds`.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct State {
    current: u32,
    worst: u32,
    worst_at: u64,
    hist: [u32; AT_BINS],
    /// When bin 0 began; 0 until the first measurement, which replaces the initial value.
    bin_start: u64,
}

/// One estimate: a service time or a network latency (Lustre's `struct adaptive_timeout`).
#[derive(Debug)]
pub struct AdaptiveTimeout {
    state: Mutex<State>,
    /// `state.current`, read without the lock by every request's deadline and reply.
    current: AtomicU32,
}

impl Default for AdaptiveTimeout {
    /// A server's service estimate before it measured anything.
    fn default() -> Self {
        AdaptiveTimeout::new(INITIAL_SERVICE_ESTIMATE)
    }
}

/// An estimate as `lctl get_param *.timeouts` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtSnapshot {
    pub current: u32,
    pub worst: u32,
    pub worst_at: u64,
    pub hist: [u32; AT_BINS],
}

impl AdaptiveTimeout {
    pub fn new(initial: u32) -> AdaptiveTimeout {
        AdaptiveTimeout {
            state: Mutex::new(State {
                current: initial,
                worst: initial,
                worst_at: now_secs(),
                ..State::default()
            }),
            current: AtomicU32::new(initial),
        }
    }

    /// Adds a measurement of `value` seconds (Lustre's `obd_at_measure`); 0 does not count,
    /// so an estimate never drops to nothing.
    pub fn measure(&self, p: &AtParams, value: u32) {
        self.measure_at(p, value, now_secs());
    }

    pub fn measure_at(&self, p: &AtParams, value: u32, now: u64) {
        if value == 0 {
            return;
        }
        let binlimit = u64::from((p.history / AT_BINS as u32).max(1));
        let mut s = self.state.lock();
        if s.bin_start == 0 {
            // The first measurement replaces the initial value.
            s.current = value;
            s.worst = value;
            s.worst_at = now;
            s.hist = [0; AT_BINS];
            s.hist[0] = value;
            s.bin_start = now;
        } else if now.saturating_sub(s.bin_start) < binlimit {
            s.hist[0] = s.hist[0].max(value);
            s.current = s.current.max(value);
        } else {
            let shift = (now - s.bin_start) / binlimit;
            debug_assert!(shift > 0);
            let mut maxv = value;
            for i in (0..AT_BINS).rev() {
                if (i as u64) >= shift {
                    s.hist[i] = s.hist[i - shift as usize];
                    maxv = maxv.max(s.hist[i]);
                } else {
                    s.hist[i] = 0;
                }
            }
            s.hist[0] = value;
            s.current = maxv;
            s.bin_start += shift * binlimit;
        }
        if s.current > s.worst {
            s.worst = s.current;
            s.worst_at = now;
        }
        self.current.store(s.current, Ordering::Relaxed);
    }

    /// The estimate, within `at_min` and `at_max` (Lustre's `obd_at_get`).
    pub fn get(&self, p: &AtParams) -> u32 {
        let cur = self.current.load(Ordering::Relaxed);
        let cur = if p.max > 0 { cur.min(p.max) } else { cur };
        cur.max(p.min)
    }

    pub fn snapshot(&self, p: &AtParams) -> AtSnapshot {
        let s = *self.state.lock();
        AtSnapshot {
            current: self.get(p),
            worst: s.worst,
            worst_at: s.worst_at,
            hist: s.hist,
        }
    }
}

/// Whole seconds of `d`, rounded down as Lustre's second counters are, saturated for the
/// wire's 16 bits.
pub fn wire_secs(d: Duration) -> u16 {
    u16::try_from(d.as_secs()).unwrap_or(u16::MAX)
}

/// What a server does about a request still running `age` after it came in with a
/// deadline `deadline` seconds after its arrival (Lustre's `ptlrpc_at_send_early_reply`):
/// it counts `at_extra` more seconds than the request has had into its service estimate
/// and, if that moves the deadline, answers with the new one. `None` when it cannot add
/// time: the request set no deadline (0: less than a second, which a caller sets to give
/// up early on purpose), is past `at_max`, or already past its deadline.
pub fn early_deadline(
    service: &AdaptiveTimeout,
    p: &AtParams,
    age: Duration,
    deadline: u32,
) -> Option<u32> {
    if p.off() || deadline == 0 || age.as_secs() > u64::from(deadline) {
        return None;
    }
    let asked = p
        .extra
        .saturating_add(age.as_secs().min(u64::from(u32::MAX)) as u32);
    service.measure(p, asked);
    let new = service.get(p);
    (new > deadline).then_some(new)
}

/// When the first early reply for a request with a deadline of `deadline` seconds goes:
/// `at_early_margin` before it, but never in the first half of it, so a short deadline is
/// not answered early at once.
pub fn early_reply_after(p: &AtParams, deadline: u32) -> Duration {
    let whole = Duration::from_secs(u64::from(deadline));
    whole
        .saturating_sub(Duration::from_secs(u64::from(p.early_margin)))
        .max(whole / 2)
}

/// One request's deadline as its target sees it, and when to ask for more time: the
/// clock the server's early replies and the in-process path share.
#[derive(Clone, Copy, Debug)]
pub struct EarlyClock {
    arrived: std::time::Instant,
    /// The deadline in whole seconds after `arrived`, as the wire carries it.
    secs: u32,
    /// The deadline itself: exactly the caller's until an extension moves it.
    until: std::time::Instant,
    /// Whether time may still be added (`false`: wait out `until`).
    open: bool,
}

impl EarlyClock {
    /// A request that came in at `arrived` with a deadline of `timeout` (less than a
    /// second, or adaptive timeouts off: never extended).
    pub fn new(p: &AtParams, arrived: std::time::Instant, timeout: Duration) -> EarlyClock {
        let secs = u32::from(wire_secs(timeout));
        EarlyClock {
            arrived,
            secs,
            until: arrived + timeout,
            open: !p.off() && secs > 0,
        }
    }

    /// Never extended (a long poll ends on its own first).
    pub fn closed(mut self) -> EarlyClock {
        self.open = false;
        self
    }

    /// When to look next: the early-reply time while time may be added, else the deadline.
    pub fn next(&self, p: &AtParams) -> std::time::Instant {
        if self.open {
            self.arrived + early_reply_after(p, self.secs)
        } else {
            self.until
        }
    }

    /// Whether `next` is the deadline itself.
    pub fn is_final(&self) -> bool {
        !self.open
    }

    /// The request is still at work at `next`: the new deadline in seconds after its
    /// arrival ([`early_deadline`]), or `None` once no more time can be added.
    pub fn extend(&mut self, service: &AdaptiveTimeout, p: &AtParams) -> Option<u32> {
        let later = early_deadline(service, p, self.arrived.elapsed(), self.secs);
        match later {
            Some(s) => {
                self.secs = s;
                self.until = self.arrived + Duration::from_secs(u64::from(s));
            }
            None => self.open = false,
        }
        later
    }
}

/// The history bins as Lustre's `timeouts` files print them.
fn hist(h: &[u32; AT_BINS]) -> String {
    h.iter().map(|v| format!("{v:3} ")).collect()
}

/// A client's estimates of one target: its network latency and its service time (Lustre's
/// `struct imp_at`, with one portal per target: nacre sends a target all its requests
/// through one service).
#[derive(Debug)]
pub struct ImportAt {
    pub portal: u32,
    pub net_latency: AdaptiveTimeout,
    pub service: AdaptiveTimeout,
    last_reply: std::sync::atomic::AtomicU64,
}

impl ImportAt {
    pub fn new(portal: u32) -> ImportAt {
        ImportAt {
            portal,
            net_latency: AdaptiveTimeout::new(0),
            service: AdaptiveTimeout::new(INITIAL_CLIENT_ESTIMATE),
            last_reply: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The deadline of the next request: its service estimate's timeout plus the network
    /// latency, or `timeout` with adaptive timeouts off; at least 1 s.
    pub fn request_timeout(&self, p: &AtParams) -> u32 {
        if p.off() {
            return p.timeout.max(1);
        }
        est_to_timeout(self.service.get(p))
            .saturating_add(self.net_latency.get(p))
            .max(1)
    }

    /// A reply came `rtt` after its request went, carrying the server's estimate and the
    /// request's service time (Lustre's `ptlrpc_at_adj_service` and `_adj_net_latency`).
    pub fn replied(&self, p: &AtParams, rtt: Duration, estimate: u16, service: u16) {
        self.last_reply
            .store(now_secs(), std::sync::atomic::Ordering::Relaxed);
        if p.off() {
            return;
        }
        self.service.measure(p, u32::from(estimate));
        let net = rtt.as_secs().saturating_sub(u64::from(service));
        // A latency of 0 s does not count, as in Lustre; 1 s is the least it records.
        self.net_latency
            .measure(p, u32::try_from(net).unwrap_or(u32::MAX));
    }

    /// `lctl get_param {mdc,osc,mgc}.*.timeouts`, in Lustre's format.
    pub fn render(&self, p: &AtParams) -> String {
        let now = now_secs();
        let last = self.last_reply.load(std::sync::atomic::Ordering::Relaxed);
        let mut out = format!(
            "{:<10} : {last}, {}s ago\n",
            "last reply",
            now.saturating_sub(last)
        );
        let n = self.net_latency.snapshot(p);
        out.push_str(&format!(
            "{:<10} : cur {:3}  worst {:3} (at {}, {}s ago) {}\n",
            "network",
            n.current,
            n.worst,
            n.worst_at,
            now.saturating_sub(n.worst_at),
            hist(&n.hist)
        ));
        let s = self.service.snapshot(p);
        out.push_str(&format!(
            "portal {:<2}  : cur {:3}  worst {:3} (at {}, {}s ago) {}\n",
            self.portal,
            s.current,
            s.worst,
            s.worst_at,
            now.saturating_sub(s.worst_at),
            hist(&s.hist)
        ));
        out
    }
}

/// `lctl get_param *.*.timeouts` of a server's service, in Lustre's format.
pub fn render_service(service: &AdaptiveTimeout, p: &AtParams) -> String {
    if p.off() {
        return format!("adaptive timeouts off, using obd_timeout {}\n", p.timeout);
    }
    let now = now_secs();
    let s = service.snapshot(p);
    format!(
        "{:>10} : cur {:3}  worst {:3} (at {}, {}s ago) {}\n",
        "service",
        s.current,
        s.worst,
        s.worst_at,
        now.saturating_sub(s.worst_at),
        hist(&s.hist)
    )
}

/// Lustre's portal numbers, shown in a client's `timeouts`.
pub const MDS_REQUEST_PORTAL: u32 = 12;
pub const OST_IO_PORTAL: u32 = 6;
pub const MGS_REQUEST_PORTAL: u32 = 26;

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> AtParams {
        AtTunables::new().params()
    }

    #[test]
    fn the_deadline_is_five_quarters_of_the_estimate_plus_five() {
        assert_eq!(est_to_timeout(0), 5);
        assert_eq!(est_to_timeout(10), 17);
        assert_eq!(est_to_timeout(40), 55);
        assert_eq!(est_to_timeout(u32::MAX), u32::MAX);
    }

    #[test]
    fn the_first_measurement_replaces_the_initial_value_and_zero_never_counts() {
        let p = params();
        let at = AdaptiveTimeout::new(10);
        at.measure_at(&p, 0, 1000);
        assert_eq!(at.get(&p), 10);
        at.measure_at(&p, 3, 1000);
        assert_eq!(at.get(&p), 3);
        at.measure_at(&p, 2, 1001);
        assert_eq!(at.get(&p), 3, "the worst of the bin stays");
    }

    #[test]
    fn a_slow_request_is_forgotten_after_at_history() {
        let p = params();
        let at = AdaptiveTimeout::new(10);
        at.measure_at(&p, 40, 1000);
        // Within the history, later fast requests leave it at 40.
        at.measure_at(&p, 2, 1000 + 300);
        assert_eq!(at.get(&p), 40);
        // Once its bin has shifted out, the estimate is the recent worst.
        at.measure_at(&p, 2, 1000 + u64::from(p.history) + 1);
        assert_eq!(at.get(&p), 2);
        let s = at.snapshot(&p);
        assert_eq!((s.worst, s.worst_at), (40, 1000));
    }

    #[test]
    fn the_estimate_stays_within_at_min_and_at_max() {
        let mut p = params();
        let at = AdaptiveTimeout::new(10);
        at.measure_at(&p, 700, 1000);
        assert_eq!(at.get(&p), 600);
        p.min = 30;
        at.measure_at(&p, 1, 1000 + 10_000);
        assert_eq!(at.get(&p), 30);
        p.max = 0;
        at.measure_at(&p, 900, 1000 + 20_000);
        assert_eq!(at.get(&p), 900, "at_max=0 bounds nothing");
    }

    #[test]
    fn tunables_keep_lustres_bounds() {
        let t = AtTunables::new();
        assert!(t.set("at_min", "700").is_err(), "above at_max");
        t.set("at_min", "40").expect("at_min");
        assert!(t.set("at_max", "20").is_err(), "below at_min");
        t.set("at_max", "0").expect("off");
        assert!(t.params().off());
        t.set("at_min", "700").expect("no at_max to be above");
        assert!(t.set("timeout", "0").is_err());
        assert!(t.set("at_history", "-1").is_err());
        assert!(t.set("at_extra", "100000").is_err());
        assert!(t.set("at_foo", "1").is_err());
        assert_eq!(t.get("at_min"), Some(700));
    }

    #[test]
    fn an_early_reply_adds_at_extra_until_at_max() {
        let p = AtParams {
            max: 100,
            ..params()
        };
        let svc = AdaptiveTimeout::new(INITIAL_SERVICE_ESTIMATE);
        // A 17 s deadline, 12 s in: 42 s is asked for.
        assert_eq!(
            early_deadline(&svc, &p, Duration::from_secs(12), 17),
            Some(42)
        );
        // Past at_max no time is added.
        assert_eq!(early_deadline(&svc, &p, Duration::from_secs(95), 100), None);
        // Nor past the deadline already.
        assert_eq!(early_deadline(&svc, &p, Duration::from_secs(50), 42), None);
        let off = AtParams { max: 0, ..p };
        assert_eq!(early_deadline(&svc, &off, Duration::from_secs(1), 17), None);
        // A deadline under a second is a caller's own, to give up early: not extended.
        assert_eq!(early_deadline(&svc, &p, Duration::ZERO, 0), None);
    }

    #[test]
    fn early_replies_go_at_the_margin_but_not_in_the_first_half() {
        let p = params();
        assert_eq!(early_reply_after(&p, 17), Duration::from_secs(12));
        assert_eq!(early_reply_after(&p, 6), Duration::from_secs(3));
        assert_eq!(early_reply_after(&p, 1), Duration::from_millis(500));
    }

    #[test]
    fn a_client_deadline_follows_its_targets_estimate() {
        let p = params();
        let imp = ImportAt::new(MDS_REQUEST_PORTAL);
        assert_eq!(
            imp.request_timeout(&p),
            est_to_timeout(INITIAL_CLIENT_ESTIMATE)
        );
        imp.replied(&p, Duration::from_millis(3), 10, 0);
        assert_eq!(imp.request_timeout(&p), 17);
        // 4 s on the way beyond a 1 s service.
        imp.replied(&p, Duration::from_secs(5), 10, 1);
        assert_eq!(imp.request_timeout(&p), 17 + 4);
        let off = AtParams { max: 0, ..p };
        assert_eq!(imp.request_timeout(&off), DEFAULT_OBD_TIMEOUT);
        let shown = imp.render(&p);
        assert!(shown.starts_with("last reply : "), "{shown}");
        assert!(
            shown.contains("\nnetwork    : cur   4  worst   4 (at "),
            "{shown}"
        );
        assert!(
            shown.contains("\nportal 12  : cur  10  worst  10 (at "),
            "{shown}"
        );
        assert!(shown.ends_with(" 10   0   0   0 \n"), "{shown}");
    }
}
