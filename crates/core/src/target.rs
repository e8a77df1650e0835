//! Target names: `<fsname>-MDT%04x`, `<fsname>-OST%04x`, and the file system name rules.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Lustre limits a file system name to 8 characters.
pub const FSNAME_MAX: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TargetKind {
    Mgs,
    Mdt,
    Ost,
}

/// One target of a file system: its kind and index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TargetName {
    pub kind: TargetKind,
    pub index: u32,
}

impl TargetName {
    pub fn mdt(index: u32) -> TargetName {
        TargetName {
            kind: TargetKind::Mdt,
            index,
        }
    }

    pub fn ost(index: u32) -> TargetName {
        TargetName {
            kind: TargetKind::Ost,
            index,
        }
    }

    pub fn mgs() -> TargetName {
        TargetName {
            kind: TargetKind::Mgs,
            index: 0,
        }
    }

    /// `MDT0000`, `OST000a`, `MGS`.
    pub fn short(&self) -> String {
        match self.kind {
            TargetKind::Mgs => "MGS".to_string(),
            TargetKind::Mdt => format!("MDT{:04x}", self.index),
            TargetKind::Ost => format!("OST{:04x}", self.index),
        }
    }

    /// `testfs-MDT0000`.
    pub fn full(&self, fsname: &str) -> String {
        format!("{fsname}-{}", self.short())
    }

    /// Parses `MDT0000`, `OST000a`, `testfs-OST0001` or `testfs-OST0001_UUID`.
    pub fn parse(s: &str) -> Option<TargetName> {
        let s = s.strip_suffix("_UUID").unwrap_or(s);
        let s = s.rsplit('-').next().unwrap_or(s);
        let (kind, idx) = if let Some(i) = s.strip_prefix("MDT") {
            (TargetKind::Mdt, i)
        } else if let Some(i) = s.strip_prefix("OST") {
            (TargetKind::Ost, i)
        } else {
            return None;
        };
        let index = u32::from_str_radix(idx, 16).ok()?;
        Some(TargetName { kind, index })
    }
}

impl fmt::Display for TargetName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short())
    }
}

/// Checks a file system name: 1 to 8 characters of `[A-Za-z0-9_]`.
/// The LNet NID of a TCP address (`HOST:PORT`, `[V6]:PORT`): `HOST@tcp`, as Lustre names
/// a peer in `MGC<nid>` and `*_conn_uuid`.
pub fn nid_of(addr: &str) -> String {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    format!("{}@tcp", host.trim_start_matches('[').trim_end_matches(']'))
}

pub fn validate_fsname(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > FSNAME_MAX {
        return Err(format!(
            "file system name '{name}' must be 1 to {FSNAME_MAX} characters"
        ));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "file system name '{name}' may only contain letters, digits and '_'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(TargetName::ost(10).full("testfs"), "testfs-OST000a");
        assert_eq!(
            TargetName::parse("testfs-OST000a_UUID"),
            Some(TargetName::ost(10))
        );
        assert_eq!(TargetName::parse("MDT0001"), Some(TargetName::mdt(1)));
        assert_eq!(TargetName::parse("foo"), None);
        assert!(validate_fsname("nacre").is_ok());
        assert!(validate_fsname("waytoolongname").is_err());
        assert!(validate_fsname("a-b").is_err());
    }
}
