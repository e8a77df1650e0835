//! A client that sends hand-crafted requests: every variant of every request, its fields at
//! their limits and beyond (zero, one, the largest values, empty and overlong names, names
//! with `/` and NUL, long lists, nested layouts), FIDs of real files and objects or made up,
//! with and without bulk, over TCP with the client key to every target. Each request gets
//! an answer (a reply or an errno) within a bound; the servers' own requests are refused
//! with EPERM; the servers go on serving other clients; and the checker finds the
//! namespace clean afterwards.
//!
//! The requests come from a serde deserializer that makes up values instead of decoding
//! them, so a request variant or a field added later is covered without a change here.

use crate::common;

use bytes::Bytes;
use common::cluster::*;
use nacre_client::file::OpenFile;
use nacre_core::Fid;
use nacre_core::layout::Layout;
use nacre_rpc::conn::{Conn, ConnConfig};
use nacre_rpc::msg::{Cred, Request};
use nacre_rpc::{Key, RpcError};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use std::collections::BTreeMap;
use std::time::Duration;

/// The requests only servers send, named here apart from the servers' own list
/// (`Request::needs_server_role`), so that a request left off that list fails this test.
const SERVERS_OWN: &[&str] = &[
    "MgsRegister",
    "MgsSetParam",
    "MgsPool",
    "OstDestroy",
    "OstPrecreate",
    "OstGetLastId",
    "OstCleanOrphans",
    "OstSetOwner",
    "DnePrepare",
    "DneCommit",
    "DneAbort",
    "DneResolve",
    "DneSeqGrant",
    "DneLookup",
    "DneLinks",
    "DneRenameLock",
    "DnePermission",
    "Lfsck",
];

/// Whether `req`, or the request a `Tracked` or `Replay` carries, is in [`SERVERS_OWN`].
fn servers_own(req: &Request) -> bool {
    let req = match req {
        Request::Tracked { req, .. } | Request::Replay { req, .. } => req,
        r => r,
    };
    let shown = format!("{req:?}");
    let name = shown
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or_default();
    SERVERS_OWN.contains(&name)
}

/// Requests made of each variant, to each target.
const ROUNDS: u64 = 24;
/// The longest any answer may take: the MDT holds a callback poll up to 10 s
/// (`CALLBACK_HOLD`), and every request of a variant is in flight at once.
const ANSWER_BOUND: Duration = Duration::from_secs(40);

type DeError = de::value::Error;

/// Makes up values for whatever type asks: a [`de::Deserializer`] with no input.
struct Gen {
    rng: u64,
    /// FIDs that name real inodes and objects; a FID is one of them three times in four.
    fids: Vec<Fid>,
    /// Nesting of sequences and enums: deeper ones are kept short, so one request stays
    /// within a frame.
    depth: u32,
    /// The variant the outermost enum takes (the request's own).
    top: Option<u32>,
    /// The outermost enum's variant names, seen on the first request made.
    names: Vec<&'static str>,
    /// Values to give before making any up: the fields of a real FID or credential.
    script: std::collections::VecDeque<u64>,
    /// The bytes of the sequence being made are plain letters (half the names and
    /// values are, so that a request gets past the name checks to what comes after).
    plain: bool,
}

impl Gen {
    fn new(seed: u64, fids: Vec<Fid>) -> Gen {
        Gen {
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03,
            fids,
            depth: 0,
            top: None,
            names: Vec::new(),
            script: Default::default(),
            plain: false,
        }
    }

    /// splitmix64.
    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }

    fn request(&mut self, variant: u32) -> Result<Request, DeError> {
        self.top = Some(variant);
        self.depth = 0;
        Request::deserialize(&mut *self)
    }

    fn u64_value(&mut self) -> u64 {
        if let Some(x) = self.script.pop_front() {
            return x;
        }
        let r = self.next();
        self.pick(&[
            0,
            1,
            2,
            4095,
            4096,
            4097,
            1 << 20,
            (1 << 20) + 1,
            1 << 32,
            1 << 40,
            1 << 62,
            i64::MAX as u64,
            i64::MAX as u64 + 1,
            u64::MAX - 1,
            u64::MAX,
            r,
            r % 10_000,
        ])
    }

    fn u32_value(&mut self) -> u32 {
        if let Some(x) = self.script.pop_front() {
            return x as u32;
        }
        let r = self.next() as u32;
        self.pick(&[
            0o100644,
            0o40755,
            0o120777,
            0,
            1,
            2,
            3,
            255,
            256,
            4096,
            65535,
            65536,
            1 << 20,
            1 << 31,
            u32::MAX - 1,
            u32::MAX,
            r,
            r % 64,
        ])
    }

    fn i64_value(&mut self) -> i64 {
        let r = self.next() as i64;
        self.pick(&[0, 1, -1, -2, 4096, i64::MIN, i64::MAX, i32::MIN as i64, r])
    }

    fn byte(&mut self) -> u8 {
        if self.plain {
            return b'a' + self.below(26) as u8;
        }
        let r = self.next() as u8;
        self.pick(&[b'a', b'a', b'z', b'.', b'/', 0, 0x7f, 0x80, 0xff, r])
    }

    /// A length for a sequence, a string or bytes: the limits of names (255), paths
    /// (4096) and xattr values (65536) and either side of them, kept short when nested.
    fn len(&mut self) -> usize {
        if let Some(x) = self.script.pop_front() {
            return x as usize;
        }
        // The request's own fields are at depth 1; a list inside a list is short.
        if self.depth > 1 {
            return self.below(3) as usize;
        }
        self.pick(&[0, 1, 1, 2, 3, 8, 255, 256, 4096, 4097, 65537])
    }

    fn string(&mut self) -> String {
        let n = self.len().min(5000);
        let chars = ['a', '.', '/', '\0', '*', 'é', '\n'];
        (0..n).map(|_| self.pick(&chars)).collect()
    }

    fn bytes(&mut self) -> Vec<u8> {
        let n = self.len();
        let plain = self.below(2) == 0;
        let outer = std::mem::replace(&mut self.plain, plain);
        let b = (0..n).map(|_| self.byte()).collect();
        self.plain = outer;
        b
    }
}

/// `n` values in a row: a sequence, a tuple, a struct's fields, a variant's fields.
struct Items<'a> {
    g: &'a mut Gen,
    left: usize,
}

impl<'de> de::SeqAccess<'de> for Items<'_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.g).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

/// The variant an enum takes, then its fields.
struct Variant<'a> {
    g: &'a mut Gen,
    index: u32,
}

impl<'de, 'a> de::EnumAccess<'de> for Variant<'a> {
    type Error = DeError;
    type Variant = Variant<'a>;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), DeError> {
        let v = seed.deserialize(self.index.into_deserializer())?;
        Ok((v, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'_> {
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, DeError> {
        seed.deserialize(&mut *self.g)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_seq(Items {
            g: self.g,
            left: len,
        })
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_seq(Items {
            g: self.g,
            left: fields.len(),
        })
    }
}

impl<'de> de::Deserializer<'de> for &mut Gen {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, _v: V) -> Result<V::Value, DeError> {
        Err(de::Error::custom(
            "a self-describing type: the wire format has none",
        ))
    }
    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let b = self.below(2) == 1;
        v.visit_bool(b)
    }
    fn deserialize_i8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let x = self.pick(&[0, 1, -1, i8::MIN, i8::MAX]);
        v.visit_i8(x)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let x = self.pick(&[0, 1, -1, i16::MIN, i16::MAX]);
        v.visit_i16(x)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let x = self.i64_value() as i32;
        let x = self.pick(&[x, 0, -1, 1, 2, i32::MIN, i32::MAX]);
        v.visit_i32(x)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let x = self.i64_value();
        v.visit_i64(x)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let x = self.byte();
        v.visit_u8(x)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let r = self.next() as u16;
        let x = self.pick(&[0, 1, 255, 256, u16::MAX, r]);
        v.visit_u16(x)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let x = self.u32_value();
        v.visit_u32(x)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let x = self.u64_value();
        v.visit_u64(x)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let x = self.pick(&[0.0, -1.0, f32::NAN, f32::INFINITY, f32::MAX]);
        v.visit_f32(x)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let x = self.pick(&[0.0, -1.0, f64::NAN, f64::INFINITY, f64::MAX]);
        v.visit_f64(x)
    }
    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let c = self.pick(&['a', '/', '\0', 'é']);
        v.visit_char(c)
    }
    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let s = self.string();
        v.visit_string(s)
    }
    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let s = self.string();
        v.visit_string(s)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let b = self.bytes();
        v.visit_byte_buf(b)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let b = self.bytes();
        v.visit_byte_buf(b)
    }
    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        if self.below(2) == 0 {
            v.visit_none()
        } else {
            v.visit_some(self)
        }
    }
    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, DeError> {
        v.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, DeError> {
        v.visit_newtype_struct(self)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let left = self.len();
        let plain = self.below(2) == 0;
        let outer = std::mem::replace(&mut self.plain, plain);
        self.depth += 1;
        let r = v.visit_seq(Items {
            g: &mut *self,
            left,
        });
        self.depth -= 1;
        self.plain = outer;
        r
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, DeError> {
        v.visit_seq(Items { g: self, left: len })
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        v: V,
    ) -> Result<V::Value, DeError> {
        v.visit_seq(Items { g: self, left: len })
    }
    fn deserialize_map<V: Visitor<'de>>(self, _v: V) -> Result<V::Value, DeError> {
        // No request holds a map today: one that does fails here, by name, until made.
        Err(de::Error::custom("a map: teach the generator to make one"))
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        if name == "Fid" && !self.fids.is_empty() && self.below(4) != 0 {
            // A real one: what the request does to it reaches the store.
            let i = self.below(self.fids.len() as u64) as usize;
            let f = self.fids[i];
            self.script
                .extend([f.seq, u64::from(f.oid), u64::from(f.ver)]);
        } else if name == "Cred" && self.below(2) == 0 {
            // Root's, half the time: past the permission checks.
            self.script.extend([0, 0, 0, nacre_rpc::msg::cap::ALL, 0]);
        }
        v.visit_seq(Items {
            g: self,
            left: fields.len(),
        })
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        let index = match self.top.take() {
            Some(i) => {
                if self.names.is_empty() {
                    self.names = variants.to_vec();
                }
                i
            }
            // A request inside a request (a replay's, a tracked one's) is kept small.
            None if self.depth > 1 => 0,
            None => self.below(variants.len() as u64) as u32,
        };
        self.depth += 1;
        let r = v.visit_enum(Variant {
            g: &mut *self,
            index,
        });
        self.depth -= 1;
        r
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_u32(0)
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_unit()
    }
    fn is_human_readable(&self) -> bool {
        false
    }
}

/// Every FID a request could name among `infos`: the inodes and their OST objects.
fn fids_of(infos: &[nacre_rpc::msg::InodeInfo]) -> Vec<Fid> {
    let mut out = vec![Fid::ROOT];
    for i in infos {
        out.push(i.attr.fid);
        for c in i.layout.iter().flat_map(|l| &l.components) {
            out.extend(c.objects.iter().map(|o| o.fid));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_crafted_requests_get_errors_and_leave_the_file_system_clean() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "hostfs", 2, 2).await;
    let c = mount(&cluster).await;
    let cred = Cred::root();

    // A small tree to aim at: a remote directory, files of one and two stripes with
    // data, a symlink, a hard link, an xattr.
    let d = c
        .mkdir_with_layout(
            Fid::ROOT,
            b"d",
            DIR,
            &cred,
            nacre_rpc::msg::DirLayoutRequest {
                stripe_count: 1,
                stripe_offset: 1,
                ..Default::default()
            },
        )
        .await
        .expect("remote mkdir");
    let mut infos = vec![d.clone()];
    let layouts = [Layout::plain(2, 1 << 16, -1), Layout::plain(1, 1 << 16, 0)];
    for (i, layout) in layouts.into_iter().enumerate() {
        for parent in [Fid::ROOT, d.attr.fid] {
            let name = format!("f{i}");
            let (fi, h) = c
                .create(
                    parent,
                    name.as_bytes(),
                    FILE,
                    0,
                    &cred,
                    None,
                    nacre_rpc::msg::LayoutRequest::Explicit(layout.clone()),
                    Some(rw()),
                    true,
                )
                .await
                .expect("create");
            let f = OpenFile::new(fi.attr.fid, h.expect("handle"), rw(), fi.layout.clone());
            c.write(&f, 0, Bytes::from(pattern(200_000, i as u8)))
                .await
                .expect("write");
            c.release(&f).await.expect("close");
            infos.push(c.getattr(fi.attr.fid).await.expect("stat"));
        }
    }
    let sym = c
        .create(
            d.attr.fid,
            b"sym",
            libc::S_IFLNK | 0o777,
            0,
            &cred,
            Some(b"../f0"),
            nacre_rpc::msg::LayoutRequest::Inherit,
            None,
            false,
        )
        .await
        .expect("symlink")
        .0;
    infos.push(sym);
    c.link(infos[1].attr.fid, d.attr.fid, b"hard", &cred)
        .await
        .expect("link");
    c.setxattr(infos[1].attr.fid, b"user.k", b"v", 0, &cred)
        .await
        .expect("setxattr");
    let fids = fids_of(&infos);

    // One connection per target, over TCP, with the client key.
    let cfg = c.config();
    let mut addrs = vec![cluster.fs.mgs_addr()];
    addrs.extend(cfg.mdts.iter().map(|t| t.addr.clone()));
    addrs.extend(cfg.osts.iter().map(|t| t.addr.clone()));
    let client_key: Key = cluster.key.client_key();
    let mut conns = Vec::new();
    for a in &addrs {
        let conn = Conn::connect(
            a,
            &ConnConfig {
                fsname: "hostfs".into(),
                client: "hostile".into(),
                key: client_key.clone(),
                max_in_flight: 64,
                timeout: ANSWER_BOUND,
            },
        )
        .await
        .expect("the client key connects");
        conns.push(conn);
    }

    // Every variant: its requests to every target at once.
    let mut names = Gen::new(0, fids.clone());
    names.request(0).expect("a ping");
    let variants = names.names.clone();
    assert!(variants.len() > 60, "{} request variants", variants.len());
    let mut answers: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut sent = 0u64;
    for (v, vname) in variants.iter().enumerate() {
        let mut calls = Vec::new();
        for round in 0..ROUNDS {
            let mut g = Gen::new((v as u64) << 32 | round, fids.clone());
            let req = g
                .request(v as u32)
                .unwrap_or_else(|e| panic!("cannot make a {vname}: {e}"));
            let servers_own = servers_own(&req);
            assert_eq!(
                req.needs_server_role(),
                servers_own,
                "{vname}: the servers' own list and this test's disagree"
            );
            let bulk_len = g.pick(&[0usize, 0, 0, 1, 4096, 1 << 20, (1 << 20) + 1]);
            let bulk = Bytes::from(pattern(bulk_len, round as u8));
            for (t, conn) in conns.iter().enumerate() {
                let (req, bulk) = (req.clone(), bulk.clone());
                calls.push(async move {
                    let r = tokio::time::timeout(ANSWER_BOUND, conn.call(&req, bulk)).await;
                    (t, req, servers_own, r)
                });
            }
        }
        sent += calls.len() as u64;
        for (t, req, servers_own, r) in futures::future::join_all(calls).await {
            let what = match &r {
                Err(_) => "no answer".to_string(),
                Ok(Ok(_)) => "ok".to_string(),
                Ok(Err(RpcError::Errno(e))) => format!("{e:?}"),
                Ok(Err(e)) => format!("{e}"),
            };
            *answers.entry(format!("{vname}: {what}")).or_default() += 1;
            let bad = match &r {
                Err(_) => Some("no answer within the bound".to_string()),
                Ok(Err(RpcError::Errno(e))) if servers_own && *e != nacre_core::Errno::EPERM => {
                    Some(format!("a servers' request answered {e:?}, not EPERM"))
                }
                Ok(Ok(_)) if servers_own => {
                    Some("a servers' request was served to a client".into())
                }
                Ok(Err(RpcError::Errno(_))) | Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(format!("the connection failed: {e}")),
            };
            if let Some(why) = bad {
                let mut shown = format!("{req:?}");
                shown.truncate(300);
                failures.push(format!("{} <- {shown}: {why}", addrs[t]));
            }
        }
    }
    for (k, n) in &answers {
        eprintln!("{n:6}  {k}");
    }
    eprintln!("{sent} requests sent");
    assert!(
        failures.is_empty(),
        "{} of {sent} requests failed:\n{}",
        failures.len(),
        failures
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );

    // The servers still serve: a new file written and read back by the ordinary client.
    let (fi, h) = c
        .create(
            Fid::ROOT,
            b"after",
            FILE,
            0,
            &cred,
            None,
            nacre_rpc::msg::LayoutRequest::Inherit,
            Some(rw()),
            true,
        )
        .await
        .expect("create after");
    let f = OpenFile::new(fi.attr.fid, h.expect("handle"), rw(), fi.layout.clone());
    let data = pattern(300_000, 9);
    c.write(&f, 0, Bytes::from(data.clone()))
        .await
        .expect("write after");
    assert!(c.read(&f, 0, data.len() as u64).await.expect("read after")[..] == data[..]);
    c.release(&f).await.expect("close after");
    for conn in conns {
        drop(conn);
    }
    quiesce_within(&c, Duration::from_secs(20)).await;
    // A client with the key may write to any object, and an object's first write gives
    // it its file, as in Lustre; but the OSTs refuse a write naming another file than an
    // object already has (`lfsck_verify_pfid`), so no object the files here wrote was
    // relabelled: the layout LFSCK finds no unmatched pair. What else the requests did
    // (objects of made-up files written first) it puts back.
    let mut unmatched = 0;
    for s in cluster.mdts.iter().flatten() {
        let l = s.lfsck.as_ref().expect("lfsck");
        l.start(nacre_rpc::lfsck::StartArgs {
            active: nacre_lustreapi::lfsck::TYPE_LAYOUT,
            ..Default::default()
        })
        .await
        .expect("lfsck_start -t layout");
        let end = std::time::Instant::now() + Duration::from_secs(60);
        while l.running() {
            assert!(std::time::Instant::now() < end, "LFSCK did not end");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        eprintln!("{}", l.layout_text());
        unmatched += l.state.lock().lo.repaired
            [nacre_lustreapi::lfsck::LayoutInconsistency::UnmatchedPair as usize];
    }
    assert_eq!(unmatched, 0, "hostile writes relabelled objects");
    let refused: u64 = cluster
        .osts
        .iter()
        .flatten()
        .filter_map(|o| o.ost())
        .map(|o| o.store().pfid_refused())
        .sum();
    eprintln!("writes refused for naming another file: {refused}");
    c.unmount();
    cluster.stop().await;
    let rep = nacre::check::check_local(dir.path()).expect("check");
    assert!(rep.is_clean(), "{}", rep.summary());
}

/// An object list longer than `OST_OBJS_MAX` is refused whole with EINVAL before the OST
/// touches an object; a list at the bound is answered for every object; and a file's
/// sync and glimpse still work (its senders split longer lists).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_lists_past_the_bound_are_refused_and_lists_at_it_answered() {
    use nacre_rpc::msg::{OST_OBJS_MAX, Reply};
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "boundfs", 1, 1).await;
    let c = mount(&cluster).await;
    let (_, fh) = create_open(&c, c.root(), b"f", Layout::plain(1, 65536, -1)).await;
    c.write(&fh, 0, Bytes::from(pattern(8192, 3)))
        .await
        .expect("write");
    c.fsync(&fh).await.expect("fsync");
    let ost = c.config().osts[0].addr.clone();
    let conn = Conn::connect(
        &ost,
        &ConnConfig {
            fsname: "boundfs".into(),
            client: "bounds".into(),
            key: cluster.key.client_key(),
            max_in_flight: 8,
            timeout: ANSWER_BOUND,
        },
    )
    .await
    .expect("the client key connects");
    let made_up = |n: usize| -> Vec<Fid> {
        (0..n as u32)
            .map(|i| Fid::new(0x2_8000_0400, i + 1, 0))
            .collect()
    };
    for objs in [made_up(OST_OBJS_MAX + 1), made_up(1 << 20)] {
        for req in [
            Request::OstGetattr { objs: objs.clone() },
            Request::OstSync { objs: objs.clone() },
            Request::OstSyncGetattr { objs: objs.clone() },
        ] {
            let name = Request::op_name(req.opcode());
            let r = tokio::time::timeout(ANSWER_BOUND, conn.call(&req, Bytes::new()))
                .await
                .unwrap_or_else(|_| panic!("{name} of {} objects: no answer", objs.len()));
            assert!(
                matches!(r, Err(RpcError::Errno(nacre_core::Errno::EINVAL))),
                "{name} of {} objects: {:?}",
                objs.len(),
                r.map(|(reply, _)| format!("{reply:?}").len())
            );
        }
    }
    let at_bound = made_up(OST_OBJS_MAX);
    let r = conn
        .call(&Request::OstGetattr { objs: at_bound }, Bytes::new())
        .await
        .expect("a list at the bound is served");
    assert!(
        matches!(&r.0, Reply::ObjAttrs(a) if a.len() == OST_OBJS_MAX),
        "{:?}",
        format!("{:?}", r.0).len()
    );
    // The OST still serves the file.
    let back = c.read(&fh, 0, 8192).await.expect("read");
    assert_eq!(&back[..], &pattern(8192, 3)[..]);
    c.release(&fh).await.expect("close");
}

/// A layout Lustre could not store (its LOV EA over 64 KiB) is refused by the MDT with
/// E2BIG, whoever skipped `lfs`'s own check: a create with thousands of components, and
/// one that fits just under the bound is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_too_large_to_store_is_refused_by_the_mdt() {
    use nacre_core::layout::{Component, EOF, MIN_STRIPE_SIZE};
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "bigfs", 1, 2).await;
    let c = mount(&cluster).await;
    let cred = Cred::root();
    let many = |count: u64| {
        Layout::composite(
            (0..count)
                .map(|i| {
                    let end = if i + 1 == count {
                        EOF
                    } else {
                        (i + 1) * u64::from(MIN_STRIPE_SIZE)
                    };
                    Component::raid0(i * u64::from(MIN_STRIPE_SIZE), end, 1, MIN_STRIPE_SIZE, -1)
                })
                .collect(),
        )
    };
    let create = |name: &'static [u8], layout: Layout| {
        let c = &c;
        let cred = &cred;
        async move {
            c.create(
                c.root(),
                name,
                libc::S_IFREG | 0o644,
                0,
                cred,
                None,
                nacre_rpc::msg::LayoutRequest::Explicit(layout),
                None,
                false,
            )
            .await
        }
    };
    // 104 bytes a one-stripe component: 629 fit in 64 KiB, 630 do not.
    assert_eq!(
        create(b"huge", many(5000)).await.err(),
        Some(nacre_core::Errno::E2BIG)
    );
    assert_eq!(
        create(b"over", many(630)).await.err(),
        Some(nacre_core::Errno::E2BIG)
    );
    let (made, _) = create(b"fits", many(629))
        .await
        .expect("a layout that fits");
    let l = made.layout.expect("layout");
    assert_eq!(l.components.len(), 629);
    assert!(c.lookup(c.root(), b"huge", &cred).await.is_err());
}
