//! Client tunables, named as Lustre names them (`osc.*.max_rpcs_in_flight`, ...).
//!
//! Each one changes behaviour: the in-flight bound of new RPCs, the dirty data a client
//! may hold, the RPC size, the readahead window, attribute cache time, the recovery
//! deadline and data checksums. They are set with `lctl set_param` (local) or `-P`
//! (through the MGS).

use nacre_core::cksum::ChecksumType;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Lustre's default `osc.*.max_rpcs_in_flight`.
pub const DEFAULT_MAX_RPCS_IN_FLIGHT: u64 = 8;
/// Default `osc.*.max_dirty_mb`.
pub const DEFAULT_MAX_DIRTY_MB: u64 = 256;
/// Default `osc.*.max_pages_per_rpc` (4 MiB of 4 KiB pages, an ldiskfs OST's brw_size).
pub const DEFAULT_MAX_PAGES_PER_RPC: u64 = 1024;
/// Default `llite.*.max_read_ahead_mb`.
pub const DEFAULT_MAX_READ_AHEAD_MB: u64 = 64;
/// Default `llite.*.max_read_ahead_per_file_mb`.
pub const DEFAULT_MAX_READ_AHEAD_PER_FILE_MB: u64 = 16;
/// Seconds an import keeps trying a target before failing requests with EIO.
pub const DEFAULT_RECOVERY_SECS: u64 = 30;
pub const PAGE_SIZE: u64 = 4096;
/// Default `osc.*.checksums`: on, as Lustre's.
pub const DEFAULT_CHECKSUMS: u64 = 1;
/// Default `osc.*.resend_count`: times a bulk damaged on the way is sent again (Lustre's
/// `OSC_DEFAULT_RESENDS`).
pub const DEFAULT_RESEND_COUNT: u64 = 10;
/// Default `llite.*.ec_parity_on_close`: on. An erasure-coded file's parity is recomputed
/// when a writer closes it, so a file is protected once written (beyond Lustre, whose EC
/// leaves parity stale until `lfs mirror resync`; 0 gives Lustre's behaviour).
pub const DEFAULT_EC_PARITY_ON_CLOSE: u64 = 1;
/// Default `mdc.*.replay_tracking`: on. Every modifying metadata request carries this
/// mount's identity and a request number and is kept until its MDT commits it, so an MDT
/// crash loses nothing this client was told (Lustre always does this). 0 sends them
/// untracked: nothing is kept or replayed, and a resend may run twice. It exists to
/// measure what recovery costs (`nacre bench recovery`).
pub const DEFAULT_REPLAY_TRACKING: u64 = 1;
/// Default `osc.*.replay_tracking`: on. Every write, punch and fallocate carries this
/// mount's identity and is kept, with its data, until its OST commits it, so a power cut
/// of an OST loses no write this client was told of (Lustre keeps such writes as unstable
/// pages). 0 sends them untracked: a power cut of an OST loses what it had not synced.
pub const DEFAULT_OSC_REPLAY_TRACKING: u64 = 1;

/// How a write reaches a mirrored (FLR) file, `llite.*.mirror_write_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirrorWriteMode {
    /// Every mirror in sync gets the write, which returns once all have it; a mirror whose
    /// OST fails is marked stale instead of failing the write.
    Immediate,
    /// Lustre's FLR: the write goes to one mirror and the MDT marks the others stale
    /// until `lfs mirror resync`.
    Delayed,
}

impl MirrorWriteMode {
    /// In the order of the tunable's values.
    pub const ALL: [MirrorWriteMode; 2] = [MirrorWriteMode::Immediate, MirrorWriteMode::Delayed];

    pub fn name(self) -> &'static str {
        match self {
            MirrorWriteMode::Immediate => "immediate",
            MirrorWriteMode::Delayed => "delayed",
        }
    }
}

/// Default `llite.*.mirror_write_mode`: immediate, so a mirrored file is redundant as soon
/// as a write returns, without an `lfs mirror resync` (Lustre's delayed mode is one
/// `lctl set_param` away).
pub const DEFAULT_MIRROR_WRITE_MODE: u64 = 0;

#[derive(Debug)]
pub struct Tunables {
    max_rpcs_in_flight: AtomicU64,
    /// `mdc.*.max_rpcs_in_flight`: metadata requests in flight per MDT.
    mdc_max_rpcs_in_flight: AtomicU64,
    max_dirty_mb: AtomicU64,
    max_pages_per_rpc: AtomicU64,
    max_read_ahead_mb: AtomicU64,
    max_read_ahead_per_file_mb: AtomicU64,
    recovery_secs: AtomicU64,
    checksums: AtomicU64,
    /// Index in [`ChecksumType::ALL`].
    checksum_type: AtomicU64,
    resend_count: AtomicU64,
    /// Index in [`MirrorWriteMode::ALL`].
    mirror_write_mode: AtomicU64,
    ec_parity_on_close: AtomicU64,
    replay_tracking: AtomicU64,
    osc_replay_tracking: AtomicU64,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            max_rpcs_in_flight: AtomicU64::new(DEFAULT_MAX_RPCS_IN_FLIGHT),
            mdc_max_rpcs_in_flight: AtomicU64::new(DEFAULT_MAX_RPCS_IN_FLIGHT),
            max_dirty_mb: AtomicU64::new(DEFAULT_MAX_DIRTY_MB),
            max_pages_per_rpc: AtomicU64::new(DEFAULT_MAX_PAGES_PER_RPC),
            max_read_ahead_mb: AtomicU64::new(DEFAULT_MAX_READ_AHEAD_MB),
            max_read_ahead_per_file_mb: AtomicU64::new(DEFAULT_MAX_READ_AHEAD_PER_FILE_MB),
            recovery_secs: AtomicU64::new(DEFAULT_RECOVERY_SECS),
            checksums: AtomicU64::new(DEFAULT_CHECKSUMS),
            checksum_type: AtomicU64::new(0),
            resend_count: AtomicU64::new(DEFAULT_RESEND_COUNT),
            mirror_write_mode: AtomicU64::new(DEFAULT_MIRROR_WRITE_MODE),
            ec_parity_on_close: AtomicU64::new(DEFAULT_EC_PARITY_ON_CLOSE),
            replay_tracking: AtomicU64::new(DEFAULT_REPLAY_TRACKING),
            osc_replay_tracking: AtomicU64::new(DEFAULT_OSC_REPLAY_TRACKING),
        }
    }
}

/// A tunable's name, class (`osc`, `llite`) and bounds.
pub struct TunableDef {
    pub class: &'static str,
    pub name: &'static str,
    pub min: u64,
    pub max: u64,
}

pub const TUNABLES: &[TunableDef] = &[
    TunableDef {
        class: "osc",
        name: "max_rpcs_in_flight",
        min: 1,
        max: 256,
    },
    TunableDef {
        class: "mdc",
        name: "max_rpcs_in_flight",
        min: 1,
        max: 256,
    },
    TunableDef {
        class: "osc",
        name: "max_dirty_mb",
        min: 1,
        max: 2048,
    },
    TunableDef {
        class: "osc",
        name: "max_pages_per_rpc",
        min: 16,
        max: 16384,
    },
    TunableDef {
        class: "llite",
        name: "max_read_ahead_mb",
        min: 0,
        max: 1024,
    },
    TunableDef {
        class: "llite",
        name: "max_read_ahead_per_file_mb",
        min: 0,
        max: 256,
    },
    TunableDef {
        class: "llite",
        name: "recovery_timeout",
        min: 1,
        max: 3600,
    },
    TunableDef {
        class: "osc",
        name: "checksums",
        min: 0,
        max: 1,
    },
    // Shown and set by name (`[crc32c] `, `crc32c`); the value is its index.
    TunableDef {
        class: "osc",
        name: "checksum_type",
        min: 0,
        max: ChecksumType::ALL.len() as u64 - 1,
    },
    // Each resend costs an RPC; a link that damages more than 100 in a row is broken.
    TunableDef {
        class: "osc",
        name: "resend_count",
        min: 0,
        max: 100,
    },
    // Shown and set by name (`immediate`, `delayed`); the value is its index.
    TunableDef {
        class: "llite",
        name: "mirror_write_mode",
        min: 0,
        max: MirrorWriteMode::ALL.len() as u64 - 1,
    },
    TunableDef {
        class: "llite",
        name: "ec_parity_on_close",
        min: 0,
        max: 1,
    },
    TunableDef {
        class: "mdc",
        name: "replay_tracking",
        min: 0,
        max: 1,
    },
    TunableDef {
        class: "osc",
        name: "replay_tracking",
        min: 0,
        max: 1,
    },
];

impl Tunables {
    fn slot(&self, class: &str, name: &str) -> Option<&AtomicU64> {
        Some(match (class, name) {
            ("osc", "max_rpcs_in_flight") => &self.max_rpcs_in_flight,
            ("mdc", "max_rpcs_in_flight") => &self.mdc_max_rpcs_in_flight,
            ("osc", "max_dirty_mb") => &self.max_dirty_mb,
            ("osc", "max_pages_per_rpc") => &self.max_pages_per_rpc,
            ("llite", "max_read_ahead_mb") => &self.max_read_ahead_mb,
            ("llite", "max_read_ahead_per_file_mb") => &self.max_read_ahead_per_file_mb,
            ("llite", "recovery_timeout") => &self.recovery_secs,
            ("osc", "checksums") => &self.checksums,
            ("osc", "checksum_type") => &self.checksum_type,
            ("osc", "resend_count") => &self.resend_count,
            ("llite", "mirror_write_mode") => &self.mirror_write_mode,
            ("llite", "ec_parity_on_close") => &self.ec_parity_on_close,
            ("mdc", "replay_tracking") => &self.replay_tracking,
            ("osc", "replay_tracking") => &self.osc_replay_tracking,
            _ => return None,
        })
    }

    /// The value of tunable `class.*.name` (`osc`, `mdc`, `llite`).
    pub fn get(&self, class: &str, name: &str) -> Option<u64> {
        self.slot(class, name).map(|a| a.load(Ordering::Relaxed))
    }

    /// Sets tunable `class.*.name`, checking its bounds.
    pub fn set(&self, class: &str, name: &str, value: u64) -> Result<(), String> {
        let def = TUNABLES
            .iter()
            .find(|d| d.class == class && d.name == name)
            .ok_or_else(|| format!("unknown parameter '{class}.*.{name}'"))?;
        if value < def.min || value > def.max {
            return Err(format!(
                "{}.{name}: {value} is out of range [{}, {}]",
                def.class, def.min, def.max
            ));
        }
        if let Some(a) = self.slot(class, name) {
            a.store(value, Ordering::Relaxed);
        }
        Ok(())
    }

    /// A tunable as `lctl get_param` shows it.
    pub fn display(&self, class: &str, name: &str) -> Option<String> {
        let v = self.get(class, name)?;
        if (class, name) == ("osc", "checksum_type") {
            return Some(self.checksum_type().list());
        }
        if (class, name) == ("llite", "mirror_write_mode") {
            return Some(self.mirror_write_mode().name().to_string());
        }
        Some(v.to_string())
    }

    /// Sets a tunable from what `lctl set_param` was given: a number, or for
    /// `checksum_type` an algorithm's name.
    pub fn set_str(&self, class: &str, name: &str, value: &str) -> Result<(), String> {
        let v = if (class, name) == ("osc", "checksum_type") {
            let t = ChecksumType::parse(value).ok_or_else(|| {
                format!(
                    "{class}.{name}: '{}' is not one of: {}",
                    value.trim(),
                    ChecksumType::Crc32c.list().trim()
                )
            })?;
            ChecksumType::ALL.iter().position(|x| *x == t).unwrap_or(0) as u64
        } else if (class, name) == ("llite", "mirror_write_mode") {
            let v = value.trim();
            MirrorWriteMode::ALL
                .iter()
                .position(|m| m.name() == v)
                .ok_or_else(|| format!("{class}.{name}: '{v}' is not one of: immediate delayed"))?
                as u64
        } else {
            value
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("{class}.{name}: '{}' is not a number", value.trim()))?
        };
        self.set(class, name, v)
    }

    /// Applies a `set_param -P` record if it names a client tunable of this file system.
    pub fn apply_persistent(&self, pattern: &str, value: &str, fsname: &str) {
        let mut parts = pattern.splitn(3, '.');
        let (Some(class), Some(dev), Some(name)) = (parts.next(), parts.next(), parts.next())
        else {
            return;
        };
        let Some(def) = TUNABLES.iter().find(|d| d.class == class && d.name == name) else {
            return;
        };
        if dev != "*" && !dev.starts_with(fsname) {
            return;
        }
        let _ = self.set_str(def.class, def.name, value);
    }

    pub fn max_rpcs_in_flight(&self) -> usize {
        self.max_rpcs_in_flight.load(Ordering::Relaxed) as usize
    }

    pub fn mdc_max_rpcs_in_flight(&self) -> usize {
        self.mdc_max_rpcs_in_flight.load(Ordering::Relaxed) as usize
    }

    pub fn max_dirty_bytes(&self) -> u64 {
        self.max_dirty_mb.load(Ordering::Relaxed) << 20
    }

    /// Largest bulk of one RPC.
    pub fn max_rpc_bytes(&self) -> u64 {
        self.max_pages_per_rpc.load(Ordering::Relaxed) * PAGE_SIZE
    }

    pub fn read_ahead_bytes(&self) -> u64 {
        self.max_read_ahead_mb.load(Ordering::Relaxed) << 20
    }

    pub fn read_ahead_per_file_bytes(&self) -> u64 {
        self.max_read_ahead_per_file_mb.load(Ordering::Relaxed) << 20
    }

    pub fn recovery_timeout(&self) -> Duration {
        Duration::from_secs(self.recovery_secs.load(Ordering::Relaxed))
    }

    /// The algorithm bulks are checksummed with, or `None` with `osc.*.checksums=0`.
    pub fn checksums(&self) -> Option<ChecksumType> {
        (self.checksums.load(Ordering::Relaxed) != 0).then(|| self.checksum_type())
    }

    pub fn checksum_type(&self) -> ChecksumType {
        let i = self.checksum_type.load(Ordering::Relaxed) as usize;
        ChecksumType::ALL
            .get(i)
            .copied()
            .unwrap_or(ChecksumType::Crc32c)
    }

    pub fn mirror_write_mode(&self) -> MirrorWriteMode {
        let i = self.mirror_write_mode.load(Ordering::Relaxed) as usize;
        MirrorWriteMode::ALL
            .get(i)
            .copied()
            .unwrap_or(MirrorWriteMode::Immediate)
    }

    pub fn resend_count(&self) -> u32 {
        self.resend_count.load(Ordering::Relaxed) as u32
    }

    /// Whether a writer's close recomputes an erasure-coded file's parity.
    pub fn ec_parity_on_close(&self) -> bool {
        self.ec_parity_on_close.load(Ordering::Relaxed) != 0
    }

    /// Whether modifying metadata requests are tracked for replay
    /// ([`DEFAULT_REPLAY_TRACKING`]).
    pub fn replay_tracking(&self) -> bool {
        self.replay_tracking.load(Ordering::Relaxed) != 0
    }

    /// Whether writes, punches and fallocates are tracked for replay
    /// ([`DEFAULT_OSC_REPLAY_TRACKING`]).
    pub fn osc_replay_tracking(&self) -> bool {
        self.osc_replay_tracking.load(Ordering::Relaxed) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_persistent_records() {
        let t = Tunables::default();
        assert!(t.set("osc", "max_rpcs_in_flight", 0).is_err());
        assert!(t.set("osc", "no_such", 1).is_err());
        assert!(t.set("llite", "max_rpcs_in_flight", 1).is_err());
        t.set("osc", "max_rpcs_in_flight", 16).expect("set");
        assert_eq!(t.max_rpcs_in_flight(), 16);
        // The MDCs' bound is their own.
        t.set("mdc", "max_rpcs_in_flight", 3).expect("set");
        assert_eq!(t.mdc_max_rpcs_in_flight(), 3);
        assert_eq!(t.max_rpcs_in_flight(), 16);
        t.apply_persistent("mdc.*.max_rpcs_in_flight", "5", "testfs");
        assert_eq!(
            (t.mdc_max_rpcs_in_flight(), t.max_rpcs_in_flight()),
            (5, 16)
        );
        t.apply_persistent("osc.*.max_dirty_mb", "64", "testfs");
        assert_eq!(t.max_dirty_bytes(), 64 << 20);
        t.apply_persistent("osc.otherfs-OST0000-osc-*.max_dirty_mb", "32", "testfs");
        assert_eq!(t.max_dirty_bytes(), 64 << 20);
        t.apply_persistent("llite.*.max_read_ahead_mb", "bogus", "testfs");
        assert_eq!(t.read_ahead_bytes(), DEFAULT_MAX_READ_AHEAD_MB << 20);
    }

    #[test]
    fn checksums_are_on_by_default_and_their_type_prints_as_lustre_does() {
        let t = Tunables::default();
        assert_eq!(t.checksums(), Some(ChecksumType::Crc32c));
        assert_eq!(t.display("osc", "checksums").as_deref(), Some("1"));
        assert_eq!(
            t.display("osc", "checksum_type").as_deref(),
            Some("[crc32c] ")
        );
        assert_eq!(t.resend_count(), 10);
        t.set_str("osc", "checksum_type", "crc32c\n")
            .expect("by name");
        assert!(t.set_str("osc", "checksum_type", "adler").is_err());
        assert!(t.set_str("osc", "checksums", "2").is_err());
        assert_eq!(t.mirror_write_mode(), MirrorWriteMode::Immediate);
        t.set_str("llite", "mirror_write_mode", "delayed")
            .expect("set");
        assert_eq!(t.mirror_write_mode(), MirrorWriteMode::Delayed);
        assert_eq!(
            t.display("llite", "mirror_write_mode").as_deref(),
            Some("delayed")
        );
        assert!(t.set_str("llite", "mirror_write_mode", "lazy").is_err());
        t.apply_persistent("osc.*.checksums", "0", "testfs");
        assert_eq!(t.checksums(), None);
        t.set_str("osc", "resend_count", "3").expect("resends");
        assert_eq!(t.resend_count(), 3);
    }
}
