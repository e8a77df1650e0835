//! Root squash (Lustre's `mdt_root_squash`): with `mdt.*.root_squash=UID:GID` set (not
//! 0:0), a request from uid 0 runs as UID:GID with no capabilities and no supplementary
//! groups, unless the client's address is in `mdt.*.nosquash_nids`.
//!
//! `nosquash_nids` takes Lustre's NID list syntax, matched against the peer address of
//! the client's connection: space-separated `ADDR@NET` entries, where NET is `tcp` (or
//! `tcpN`) and ADDR is four dot-separated parts, each a number, `*`, or a bracketed list
//! of numbers and ranges (`192.168.1.[10-20] 10.0.[0-3].[1,5,7-9/2]`), or ADDR is `*`.
//! `NONE` or `clear` empties it. A client in the MDT's own process reaches it through
//! in-process delivery with the address the MDT listens on.

use nacre_rpc::msg::Cred;
use parking_lot::RwLock;
use std::net::IpAddr;

/// Longest `nosquash_nids` value accepted (Lustre's limit).
const MAX_NIDLIST: usize = 4096;

/// One part of an IPv4 address pattern: the values it accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Part(Vec<(u8, u8, u8)>);

impl Part {
    fn parse(s: &str) -> Option<Part> {
        if s == "*" {
            return Some(Part(vec![(0, 255, 1)]));
        }
        let inner = match s.strip_prefix('[') {
            Some(r) => r.strip_suffix(']')?,
            None => s,
        };
        let mut ranges = Vec::new();
        for item in inner.split(',') {
            let (range, step) = match item.split_once('/') {
                Some((r, st)) => (r, st.parse::<u8>().ok().filter(|s| *s > 0)?),
                None => (item, 1),
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (a.parse::<u8>().ok()?, b.parse::<u8>().ok()?),
                None => {
                    let v = range.parse::<u8>().ok()?;
                    (v, v)
                }
            };
            if lo > hi || (s == inner && (lo != hi || step != 1)) {
                // A range needs brackets.
                return None;
            }
            ranges.push((lo, hi, step));
        }
        Some(Part(ranges))
    }

    fn matches(&self, v: u8) -> bool {
        self.0
            .iter()
            .any(|&(lo, hi, step)| v >= lo && v <= hi && (v - lo).is_multiple_of(step))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Nid {
    /// `ADDR@tcp`: an IPv4 pattern (`*@tcp` accepts every address).
    Tcp(Option<[Part; 4]>),
    /// `0@lo` and other networks nacre does not have: accepted, match no peer.
    Other,
}

/// A parsed `nosquash_nids` list, kept with its text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NidList {
    text: String,
    nids: Vec<Nid>,
}

impl NidList {
    pub fn parse(s: &str) -> Result<NidList, String> {
        let s = s.trim();
        if s.len() > MAX_NIDLIST {
            return Err(format!("a NID list of at most {MAX_NIDLIST} bytes"));
        }
        if s.is_empty() || s == "NONE" || s == "clear" {
            return Ok(NidList::default());
        }
        let mut nids = Vec::new();
        for item in s.split_whitespace() {
            let bad =
                || format!("'{item}' is not a NID range (ADDR@NET, e.g. 192.168.1.[10-20]@tcp)");
            let (addr, net) = item.rsplit_once('@').ok_or_else(bad)?;
            let tcp = net
                .strip_prefix("tcp")
                .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()));
            if !tcp {
                if net.is_empty() || !net.chars().all(|c| c.is_ascii_alphanumeric()) {
                    return Err(bad());
                }
                nids.push(Nid::Other);
                continue;
            }
            if addr == "*" {
                nids.push(Nid::Tcp(None));
                continue;
            }
            let parts: Vec<Part> = addr
                .split('.')
                .map(Part::parse)
                .collect::<Option<_>>()
                .ok_or_else(bad)?;
            let parts: [Part; 4] = parts.try_into().map_err(|_| bad())?;
            nids.push(Nid::Tcp(Some(parts)));
        }
        Ok(NidList {
            text: s.split_whitespace().collect::<Vec<_>>().join(" "),
            nids,
        })
    }

    pub fn matches(&self, peer: IpAddr) -> bool {
        let IpAddr::V4(v4) = peer else {
            return false;
        };
        let o = v4.octets();
        self.nids.iter().any(|n| match n {
            Nid::Tcp(None) => true,
            Nid::Tcp(Some(p)) => p.iter().zip(o).all(|(part, v)| part.matches(v)),
            Nid::Other => false,
        })
    }

    /// As `lctl get_param` shows it.
    pub fn show(&self) -> String {
        if self.nids.is_empty() {
            "NONE".to_string()
        } else {
            self.text.clone()
        }
    }
}

/// An MDT's root squash settings.
#[derive(Default)]
pub struct RootSquash {
    inner: RwLock<(u32, u32, NidList)>,
}

impl RootSquash {
    /// Squashes `cred` if it is root's and `peer` is not exempt.
    pub fn apply(&self, cred: &mut Cred, peer: IpAddr) {
        if cred.uid != 0 {
            return;
        }
        let g = self.inner.read();
        let (uid, gid, ref nids) = *g;
        if uid == 0 || nids.matches(peer) {
            return;
        }
        cred.uid = uid;
        cred.gid = gid;
        cred.cap = 0;
        cred.groups.clear();
    }

    /// `root_squash`: `UID:GID`.
    pub fn show(&self) -> String {
        let g = self.inner.read();
        format!("{}:{}", g.0, g.1)
    }

    pub fn set(&self, v: &str) -> Result<(), String> {
        let (u, g) = v
            .trim()
            .split_once(':')
            .ok_or_else(|| format!("'{v}' needs uid:gid format"))?;
        let num = |s: &str, what: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("'{v}': bad {what}"))
        };
        let (uid, gid) = (num(u, "uid")?, num(g, "gid")?);
        let mut w = self.inner.write();
        w.0 = uid;
        w.1 = gid;
        Ok(())
    }

    pub fn nosquash_nids(&self) -> String {
        self.inner.read().2.show()
    }

    pub fn set_nosquash_nids(&self, v: &str) -> Result<(), String> {
        let l = NidList::parse(v)?;
        self.inner.write().2 = l;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn nid_lists_as_lustre_writes_them() {
        let l = NidList::parse("192.168.1.[10-20]@tcp 10.0.0.1@tcp 172.16.[0-3].[1,5,7-9/2]@tcp1")
            .expect("parse");
        assert!(l.matches(ip("192.168.1.10")));
        assert!(l.matches(ip("192.168.1.20")));
        assert!(!l.matches(ip("192.168.1.21")));
        assert!(l.matches(ip("10.0.0.1")));
        assert!(!l.matches(ip("10.0.0.2")));
        assert!(l.matches(ip("172.16.3.9")));
        assert!(!l.matches(ip("172.16.3.8")), "7-9/2 is 7 and 9");
        assert!(l.matches(ip("172.16.0.5")));
        assert!(NidList::parse("*@tcp").expect("any").matches(ip("1.2.3.4")));
        assert!(!NidList::parse("0@lo").expect("lo").matches(ip("127.0.0.1")));
        assert_eq!(NidList::parse("NONE").expect("none").show(), "NONE");
        for bad in [
            "10.0.0.1",
            "10.0.0@tcp",
            "10.0.0.1-3@tcp",
            "10.0.0.[3-1]@tcp",
            "a.b.c.d@tcp",
        ] {
            assert!(NidList::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn root_is_squashed_unless_listed() {
        let s = RootSquash::default();
        let mut c = Cred::root();
        s.apply(&mut c, ip("10.0.0.1"));
        assert_eq!(c, Cred::root(), "0:0 squashes nothing");
        s.set("99:98").expect("set");
        s.set_nosquash_nids("10.0.0.[1-2]@tcp").expect("set");
        let mut c = Cred::root();
        s.apply(&mut c, ip("10.0.0.2"));
        assert_eq!(c, Cred::root());
        s.apply(&mut c, ip("10.0.0.3"));
        assert_eq!((c.uid, c.gid, c.cap), (99, 98, 0));
        let mut u = Cred::user(5, 5, vec![1], 0);
        s.apply(&mut u, ip("10.0.0.3"));
        assert_eq!(u.uid, 5);
        assert!(s.set("99").is_err());
        assert_eq!(s.show(), "99:98");
    }
}
