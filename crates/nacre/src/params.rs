//! Tunable parameters of this process, under Lustre's names, for `lctl`.
//!
//! A process exposes the parameters of what it runs: a client's `osc.*`, `mdc.*` and
//! `llite.*` tunables, and a server's `lod.*`, `osp.*`, `osd-*.*` values. `lctl` reaches
//! them through the process's control socket; `set_param -P` records a setting on the MGS,
//! and every process applies the records that match its parameters when the configuration
//! changes (see [`apply_persistent`]).

use nacre_client::Client;
use nacre_core::size::parse_size;
use nacre_lustreapi::devices::{Device, DeviceStatus};
use nacre_lustreapi::lctl::ParamPattern;
use nacre_mdt::Mdt;
use nacre_mdt::lod::LodParams;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One parameter as `lctl` sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamValue {
    pub name: String,
    pub value: String,
    pub writable: bool,
}

pub trait ParamSource: Send + Sync {
    fn list(&self) -> Vec<ParamValue>;
    /// Sets one parameter by its full name.
    fn set(&self, name: &str, value: &str) -> Result<(), String>;
    /// The devices whose parameters these are, as `lctl dl` lists them, in the order
    /// Lustre sets them up.
    fn devices(&self) -> Vec<Device> {
        Vec::new()
    }
}

/// A device of this process, `Up` unless `inactive`.
fn device(class: &str, name: String, uuid: String, refcount: usize, inactive: bool) -> Device {
    Device {
        status: if inactive {
            DeviceStatus::Inactive
        } else {
            DeviceStatus::Up
        },
        class: class.to_string(),
        name,
        uuid,
        refcount: u32::try_from(refcount).unwrap_or(u32::MAX),
        conn: None,
    }
}

/// The storage device of target `name` (`MGS`, `FSNAME-MDT0000`, `FSNAME-OST0000`).
fn osd_device(name: &str, refcount: usize) -> Device {
    device(
        "osd-nacre",
        format!("{name}-osd"),
        format!("{name}-osd_UUID"),
        refcount,
        false,
    )
}

/// The devices of the MGS this process serves: its storage and the service.
pub fn mgs_devices(mgs: &Arc<nacre_mgs::Mgs>) -> Vec<Device> {
    let refs = Arc::strong_count(mgs);
    vec![
        osd_device("MGS", refs),
        device("mgs", "MGS".into(), "MGS".into(), refs, false),
    ]
}

fn num(name: &str, value: &str) -> Result<u64, String> {
    value
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("{name}: '{value}' is not a number"))
}

/// A client's tunables.
pub struct ClientParams {
    client: Arc<Client>,
    /// Stands for Lustre's superblock address in client device names.
    sb: String,
}

impl ClientParams {
    pub fn new(client: Arc<Client>) -> ClientParams {
        let sb = format!("ffff{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
        ClientParams { client, sb }
    }

    /// Each tunable's full name, with its class and name.
    fn names(&self) -> Vec<(String, &'static str, &'static str)> {
        let fs = &self.client.fsname;
        let mut v = Vec::new();
        for i in 0..self.client.ost_count() {
            for p in [
                "max_rpcs_in_flight",
                "max_dirty_mb",
                "max_pages_per_rpc",
                "checksums",
                "checksum_type",
                "resend_count",
                "replay_tracking",
            ] {
                v.push((format!("osc.{fs}-OST{i:04x}-osc-{}.{p}", self.sb), "osc", p));
            }
        }
        for i in 0..self.client.mdt_count() {
            for p in ["max_rpcs_in_flight", "replay_tracking"] {
                v.push((format!("mdc.{fs}-MDT{i:04x}-mdc-{}.{p}", self.sb), "mdc", p));
            }
        }
        for p in [
            "max_read_ahead_mb",
            "max_read_ahead_per_file_mb",
            "recovery_timeout",
            "mirror_write_mode",
            "ec_parity_on_close",
        ] {
            v.push((format!("llite.{fs}-{}.{p}", self.sb), "llite", p));
        }
        v
    }
}

impl ParamSource for ClientParams {
    fn devices(&self) -> Vec<Device> {
        let c = &self.client;
        let (fs, sb) = (&c.fsname, &self.sb);
        // Every device of a mount shares the mount's UUID, as Lustre's client devices do.
        let uuid = format!("{:016x}", c.uuid());
        let refs = Arc::strong_count(c);
        let config = c.config();
        let mgc = c.mgc();
        let mut v = vec![
            device("mgc", mgc.device_name(), uuid.clone(), refs, false),
            device(
                "lov",
                format!("{fs}-clilov-{sb}"),
                uuid.clone(),
                refs,
                false,
            ),
            device(
                "lmv",
                format!("{fs}-clilmv-{sb}"),
                uuid.clone(),
                refs,
                false,
            ),
        ];
        let imports = c.mdcs().into_iter().chain(c.oscs());
        for imp in imports {
            let t = imp.target();
            let listed = match t.kind {
                nacre_core::TargetKind::Mdt => &config.mdts,
                _ => &config.osts,
            };
            let entry = listed.iter().find(|e| e.name == t);
            let class = if t.kind == nacre_core::TargetKind::Mdt {
                "mdc"
            } else {
                "osc"
            };
            let mut d = device(
                class,
                nacre_lustreapi::tgts::client_device(fs, t, sb),
                uuid.clone(),
                // Less the one this loop holds.
                Arc::strong_count(&imp) - 1,
                !entry.is_some_and(|e| e.active),
            );
            d.conn = entry.map(|e| nacre_core::target::nid_of(&e.addr));
            v.push(d);
        }
        v
    }

    fn list(&self) -> Vec<ParamValue> {
        let mut v: Vec<ParamValue> = self
            .names()
            .into_iter()
            .map(|(name, class, t)| ParamValue {
                name,
                value: self.client.tunables.display(class, t).unwrap_or_default(),
                writable: true,
            })
            .collect();
        let fs = &self.client.fsname;
        // `lov.*.pools.NAME`: each pool's OSTs, as the configuration has them.
        for pool in self.client.config().pools {
            v.push(ParamValue {
                name: format!("lov.{fs}-clilov-{}.pools.{}", self.sb, pool.name),
                value: nacre_lustreapi::pool::members(fs, &pool.osts),
                writable: false,
            });
        }
        for i in 0..self.client.ost_count() {
            v.push(ParamValue {
                name: format!("osc.{fs}-OST{i:04x}-osc-{}.rpc_stats", self.sb),
                value: self.client.rpc_stats.render(i as u32),
                writable: true,
            });
        }
        // Checksum errors each target's bulks met (see nacre_client::cksum).
        let targets = (0..self.client.ost_count())
            .map(|i| {
                (
                    format!("osc.{fs}-OST{i:04x}-osc-{}", self.sb),
                    nacre_core::TargetName::ost(i as u32),
                )
            })
            .chain((0..self.client.mdt_count()).map(|i| {
                (
                    format!("mdc.{fs}-MDT{i:04x}-mdc-{}", self.sb),
                    nacre_core::TargetName::mdt(i as u32),
                )
            }));
        for (dev, t) in targets {
            let c = self.client.cksum_stats.get(t);
            v.push(ParamValue {
                name: format!("{dev}.checksum_errors"),
                value: c.checksum_errors.to_string(),
                writable: false,
            });
            v.push(ParamValue {
                name: format!("{dev}.corrupt_reads"),
                value: c.corrupt_reads.to_string(),
                writable: false,
            });
            v.push(ParamValue {
                name: format!("{dev}.mirror_repairs"),
                value: c.repaired.to_string(),
                writable: false,
            });
        }
        let at = nacre_rpc::at::AT.params();
        for (i, imp) in self.client.oscs().iter().enumerate() {
            v.push(ParamValue {
                name: format!("osc.{fs}-OST{i:04x}-osc-{}.stats", self.sb),
                value: imp.stats().render(),
                writable: true,
            });
            v.push(ParamValue {
                name: format!("osc.{fs}-OST{i:04x}-osc-{}.timeouts", self.sb),
                value: imp.at().render(&at),
                writable: false,
            });
            // Space this OST promised for cached writes, not yet taken by them.
            v.push(ParamValue {
                name: format!("osc.{fs}-OST{i:04x}-osc-{}.cur_grant_bytes", self.sb),
                value: self.client.cur_grant_bytes(i as u32).to_string(),
                writable: false,
            });
            // Written data kept for replay until the OST commits it, in Lustre's format.
            let kept = self
                .client
                .osc_replay(i as u32)
                .map_or(0, |r| r.kept_bytes());
            v.push(ParamValue {
                name: format!("osc.{fs}-OST{i:04x}-osc-{}.unstable_stats", self.sb),
                value: format!(
                    "unstable_pages: {:>20}\nunstable_mb:              {:>10}\n",
                    kept.div_ceil(4096),
                    kept >> 20
                ),
                writable: false,
            });
            // The client's dirty bytes (Lustre counts them per OST; write-behind here
            // bounds them for the whole client).
            v.push(ParamValue {
                name: format!("osc.{fs}-OST{i:04x}-osc-{}.cur_dirty_bytes", self.sb),
                value: self.client.dirty_bytes().to_string(),
                writable: false,
            });
        }
        for (i, imp) in self.client.mdcs().iter().enumerate() {
            v.push(ParamValue {
                name: format!("mdc.{fs}-MDT{i:04x}-mdc-{}.stats", self.sb),
                value: imp.stats().render(),
                writable: true,
            });
            v.push(ParamValue {
                name: format!("mdc.{fs}-MDT{i:04x}-mdc-{}.timeouts", self.sb),
                value: imp.at().render(&at),
                writable: false,
            });
        }
        let mgc = self.client.mgc();
        v.push(ParamValue {
            name: format!("mgc.{}.timeouts", mgc.device_name()),
            value: mgc.at().render(&at),
            writable: false,
        });
        v.push(ParamValue {
            name: format!("llite.{fs}-{}.stats", self.sb),
            value: self
                .client
                .llite_stats
                .render_with(nacre_client::stats::VfsOp::name_of),
            writable: true,
        });
        // Degraded reads of erasure-coded files (see nacre_client::ec).
        v.push(ParamValue {
            name: format!("llite.{fs}-{}.ec_degraded_reads", self.sb),
            value: self.client.ec_stats.degraded_reads().to_string(),
            writable: false,
        });
        v.push(ParamValue {
            name: format!("llite.{fs}-{}.ec_rows_decoded", self.sb),
            value: self.client.ec_stats.rows_decoded().to_string(),
            writable: false,
        });
        v.push(ParamValue {
            name: format!("llite.{fs}-{}.cur_dirty_bytes", self.sb),
            value: self.client.dirty_bytes().to_string(),
            writable: false,
        });
        v
    }

    fn set(&self, name: &str, value: &str) -> Result<(), String> {
        if name.ends_with(".stats") {
            // Writing anything clears them, as in Lustre.
            let fs = &self.client.fsname;
            if name == format!("llite.{fs}-{}.stats", self.sb) {
                self.client.llite_stats.clear();
                return Ok(());
            }
            let imports = self
                .client
                .oscs()
                .into_iter()
                .enumerate()
                .map(|(i, imp)| (format!("osc.{fs}-OST{i:04x}-osc-{}.stats", self.sb), imp));
            let mut imports =
                imports.chain(
                    self.client.mdcs().into_iter().enumerate().map(|(i, imp)| {
                        (format!("mdc.{fs}-MDT{i:04x}-mdc-{}.stats", self.sb), imp)
                    }),
                );
            let (_, imp) = imports
                .find(|(n, _)| n == name)
                .ok_or_else(|| format!("{name}: no such parameter"))?;
            imp.stats().clear();
            return Ok(());
        }
        if let Some(rest) = name.strip_suffix(".rpc_stats") {
            // Writing anything clears the statistics, as in Lustre.
            let idx = rest
                .rsplit('-')
                .find_map(|p| p.strip_prefix("OST"))
                .and_then(|i| u32::from_str_radix(i, 16).ok())
                .ok_or_else(|| format!("{name}: no such parameter"))?;
            self.client.rpc_stats.clear(idx);
            return Ok(());
        }
        let Some((_, class, t)) = self.names().into_iter().find(|(n, _, _)| n == name) else {
            return Err(format!("{name}: no such parameter"));
        };
        self.client.tunables.set_str(class, t, value)?;
        self.client.refresh_imports();
        Ok(())
    }
}

/// Request statistics of the targets this process serves: `mdt.*.md_stats` and
/// `obdfilter.*.stats`, Lustre's names; writing any value clears them. Beside them each
/// target's service time estimate, `mdt.*.timeouts` and `obdfilter.*.timeouts` (Lustre
/// shows it per service, `mds.MDS.mdt.timeouts`; here each target has its own).
pub struct ServerStats {
    pub stats: Vec<(String, Arc<nacre_rpc::stats::OpStats>)>,
    pub timeouts: Vec<(String, Arc<nacre_rpc::at::AdaptiveTimeout>)>,
}

impl ServerStats {
    /// The statistics and estimates of `served`.
    pub fn of<'a>(
        fsname: &str,
        served: impl IntoIterator<Item = &'a crate::node::Served>,
    ) -> ServerStats {
        let mut s = ServerStats {
            stats: Vec::new(),
            timeouts: Vec::new(),
        };
        for t in served {
            if let Some((dev, stats)) = ServerStats::device(fsname, &t.name) {
                s.stats.push((format!("{dev}.{stats}"), t.stats.clone()));
                s.timeouts
                    .push((format!("{dev}.timeouts"), t.service_at.clone()));
            }
        }
        s
    }
}

/// The adaptive timeout tunables of this process (Lustre's `timeout`, `at_min`, `at_max`,
/// `at_history`, `at_early_margin` and `at_extra`, see [`nacre_rpc::at`]).
pub struct TimeoutParams;

impl ParamSource for TimeoutParams {
    fn list(&self) -> Vec<ParamValue> {
        nacre_rpc::at::NAMES
            .iter()
            .map(|n| ParamValue {
                name: (*n).to_string(),
                value: nacre_rpc::at::AT.get(n).unwrap_or_default().to_string(),
                writable: true,
            })
            .collect()
    }

    fn set(&self, name: &str, value: &str) -> Result<(), String> {
        nacre_rpc::at::AT.set(name, value)
    }
}

/// `version`: this nacre's version (Lustre's `lctl get_param version`).
pub struct VersionParam;

impl ParamSource for VersionParam {
    fn list(&self) -> Vec<ParamValue> {
        vec![ParamValue {
            name: "version".into(),
            value: env!("CARGO_PKG_VERSION").into(),
            writable: false,
        }]
    }

    fn set(&self, name: &str, _value: &str) -> Result<(), String> {
        Err(format!("{name}: read-only parameter"))
    }
}

impl ServerStats {
    /// A target's device (`mdt.<target>`, `obdfilter.<target>`) and the name of its
    /// request statistics there; the MGS has none.
    fn device(fsname: &str, target: &nacre_core::TargetName) -> Option<(String, &'static str)> {
        let full = target.full(fsname);
        if full.contains("-MDT") {
            Some((format!("mdt.{full}"), "md_stats"))
        } else if full.contains("-OST") {
            Some((format!("obdfilter.{full}"), "stats"))
        } else {
            None
        }
    }
}

impl ParamSource for ServerStats {
    fn list(&self) -> Vec<ParamValue> {
        let at = nacre_rpc::at::AT.params();
        self.stats
            .iter()
            .map(|(name, s)| ParamValue {
                name: name.clone(),
                value: s.render(),
                writable: true,
            })
            .chain(self.timeouts.iter().map(|(name, t)| ParamValue {
                name: name.clone(),
                value: nacre_rpc::at::render_service(t, &at),
                writable: false,
            }))
            .collect()
    }

    fn set(&self, name: &str, _value: &str) -> Result<(), String> {
        let (_, s) = self
            .stats
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| format!("{name}: no such parameter"))?;
        s.clear();
        Ok(())
    }
}

/// An OST's parameters, as the OST declares them ([`nacre_ost::Ost::params`]), under
/// `obdfilter.<fs>-OSTxxxx.`.
pub struct OstParams {
    pub fsname: String,
    pub ost: Arc<nacre_ost::Ost>,
}

impl OstParams {
    fn prefix(&self) -> String {
        format!("obdfilter.{}-OST{:04x}.", self.fsname, self.ost.index)
    }
}

impl ParamSource for OstParams {
    fn devices(&self) -> Vec<Device> {
        let name = format!("{}-OST{:04x}", self.fsname, self.ost.index);
        let refs = Arc::strong_count(&self.ost);
        vec![
            osd_device(&name, refs),
            device("ost", "OSS".into(), "OSS_uuid".into(), refs, false),
            device(
                "obdfilter",
                name.clone(),
                format!("{name}_UUID"),
                refs,
                false,
            ),
        ]
    }

    fn list(&self) -> Vec<ParamValue> {
        let pre = self.prefix();
        self.ost
            .params()
            .into_iter()
            .map(|p| ParamValue {
                name: format!("{pre}{}", p.name),
                value: p.value,
                writable: p.writable,
            })
            .collect()
    }

    fn set(&self, name: &str, value: &str) -> Result<(), String> {
        let short = name
            .strip_prefix(&self.prefix())
            .ok_or_else(|| format!("{name}: no such parameter"))?;
        self.ost
            .set_param(short, value)
            .map_err(|e| format!("{}{e}", self.prefix()))
    }
}

/// An MDT's parameters.
pub struct MdtParams {
    pub fsname: String,
    pub mdt: Arc<Mdt>,
}

impl MdtParams {
    fn lod(&self) -> String {
        format!("lod.{}-MDT{:04x}-mdtlov", self.fsname, self.mdt.index)
    }

    fn osd(&self) -> String {
        format!("osd-nacre.{}-MDT{:04x}", self.fsname, self.mdt.index)
    }

    /// This MDT's proxy of OST `ost_idx`, as Lustre names it.
    fn osp_name(&self, ost_idx: u32) -> String {
        format!(
            "osp.{}-OST{:04x}-osc-MDT{:04x}",
            self.fsname, ost_idx, self.mdt.index
        )
    }
}

impl ParamSource for MdtParams {
    fn devices(&self) -> Vec<Device> {
        let (fs, i) = (&self.fsname, self.mdt.index);
        let name = format!("{fs}-MDT{i:04x}");
        let lov = format!("{name}-mdtlov");
        let refs = Arc::strong_count(&self.mdt);
        let mut v = vec![
            osd_device(&name, refs),
            device("mds", "MDS".into(), "MDS_uuid".into(), refs, false),
            device("lod", lov.clone(), format!("{lov}_UUID"), refs, false),
            device("mdt", name.clone(), format!("{name}_UUID"), refs, false),
            device(
                "mdd",
                format!("{fs}-MDD{i:04x}"),
                format!("{fs}-MDD{i:04x}_UUID"),
                refs,
                false,
            ),
        ];
        for osp in self.mdt.lod().osps() {
            // `osp.NAME` less the class.
            let dev = self.osp_name(osp.ost_idx);
            let dev = dev.strip_prefix("osp.").unwrap_or(&dev).to_string();
            v.push(device(
                "osp",
                dev,
                format!("{lov}_UUID"),
                Arc::strong_count(&osp) - 1,
                false,
            ));
        }
        v
    }

    fn list(&self) -> Vec<ParamValue> {
        let p = self.mdt.lod().params();
        let lod = self.lod();
        let rw = |n: &str, v: String| ParamValue {
            name: format!("{lod}.{n}"),
            value: v,
            writable: true,
        };
        let mut v = vec![
            rw("stripesize", p.stripe_size.to_string()),
            rw("stripecount", p.stripe_count.to_string()),
            rw("stripeoffset", p.stripe_offset.to_string()),
            rw("dom_stripesize", p.dom_stripesize.to_string()),
            rw(
                "dom_stripesize_max_kb",
                (p.dom_stripesize >> 10).to_string(),
            ),
            ParamValue {
                name: format!("{lod}.numobd"),
                value: self.mdt.lod().ost_count().to_string(),
                writable: false,
            },
            ParamValue {
                name: format!(
                    "mdt.{}-MDT{:04x}.dom_read_open",
                    self.fsname, self.mdt.index
                ),
                value: u8::from(
                    self.mdt
                        .dom_read_open
                        .load(std::sync::atomic::Ordering::Relaxed),
                )
                .to_string(),
                writable: true,
            },
            ParamValue {
                name: format!("mdt.{}-MDT{:04x}.root_squash", self.fsname, self.mdt.index),
                value: self.mdt.squash.show(),
                writable: true,
            },
            ParamValue {
                name: format!(
                    "mdt.{}-MDT{:04x}.nosquash_nids",
                    self.fsname, self.mdt.index
                ),
                value: self.mdt.squash.nosquash_nids(),
                writable: true,
            },
            ParamValue {
                name: format!("mdt.{}-MDT{:04x}.health_check", self.fsname, self.mdt.index),
                value: self.mdt.health_check(),
                writable: false,
            },
            ParamValue {
                name: format!("{}.sync_journal", self.osd()),
                value: u8::from(self.mdt.store().sync_journal()).to_string(),
                writable: true,
            },
            ParamValue {
                name: format!("{}.checkpoint_interval", self.osd()),
                value: self.mdt.store().checkpoint_interval().as_secs().to_string(),
                writable: true,
            },
            ParamValue {
                name: format!("{}.journal_stats", self.osd()),
                value: {
                    let st = self.mdt.store().stats();
                    let n = |a: &std::sync::atomic::AtomicU64| {
                        a.load(std::sync::atomic::Ordering::Relaxed)
                    };
                    format!(
                        "transactions {}\nbatches {}\njournal_syncs {}\ncheckpoints {}",
                        n(&st.transactions),
                        n(&st.batches),
                        n(&st.journal_syncs),
                        n(&st.checkpoints)
                    )
                },
                writable: false,
            },
        ];
        for pool in self.mdt.lod().pools() {
            v.push(ParamValue {
                name: format!("{lod}.pools.{}", pool.name),
                value: nacre_lustreapi::pool::members(&self.fsname, &pool.osts),
                writable: false,
            });
        }
        let mdt = format!("mdt.{}-MDT{:04x}", self.fsname, self.mdt.index);
        let (soft, hard) = self.mdt.recovery.window();
        v.push(ParamValue {
            name: format!("{mdt}.recovery_status"),
            value: self.mdt.recovery.status_text(),
            writable: false,
        });
        // Lustre counts every export not yet evicted: connected, and parked waiting for
        // its client to come back.
        v.push(ParamValue {
            name: format!("{mdt}.num_exports"),
            value: (self.mdt.exports.len() + self.mdt.exports.parked()).to_string(),
            writable: false,
        });
        // Lustre's LDLM namespace of the MDT: the locks it holds for clients (here the
        // `fcntl`/`flock` ranges and the append locks).
        v.push(ParamValue {
            name: format!(
                "ldlm.namespaces.mdt-{}-MDT{:04x}_UUID.lock_count",
                self.fsname, self.mdt.index
            ),
            value: (self.mdt.flocks.len() + self.mdt.appends.len()).to_string(),
            writable: false,
        });
        v.push(ParamValue {
            name: format!("{mdt}.export_grace"),
            value: self.mdt.exports.grace().as_secs().to_string(),
            writable: true,
        });
        v.push(ParamValue {
            name: format!("{mdt}.recovery_time_soft"),
            value: soft.to_string(),
            writable: true,
        });
        v.push(ParamValue {
            name: format!("{mdt}.recovery_time_hard"),
            value: hard.to_string(),
            writable: true,
        });
        v.extend(self.mdt.dom_params().into_iter().map(|p| ParamValue {
            name: format!("{mdt}.{}", p.name),
            value: p.value,
            writable: p.writable,
        }));
        for osp in self.mdt.lod().osps() {
            let base = self.osp_name(osp.ost_idx);
            v.extend(
                osp.params()
                    .into_iter()
                    .map(|(name, value, writable)| ParamValue {
                        name: format!("{base}.{name}"),
                        value,
                        writable,
                    }),
            );
        }
        v
    }

    fn set(&self, name: &str, value: &str) -> Result<(), String> {
        for osp in self.mdt.lod().osps() {
            let base = self.osp_name(osp.ost_idx);
            if let Some(param) = name.strip_prefix(&base).and_then(|r| r.strip_prefix('.')) {
                return osp.set_param(param, value);
            }
        }
        let lod = self.lod();
        let Some(param) = name.strip_prefix(&lod).and_then(|r| r.strip_prefix('.')) else {
            if name == format!("{}.sync_journal", self.osd()) {
                self.mdt.store().set_sync_journal(num(name, value)? != 0);
                return Ok(());
            }
            if name == format!("{}.checkpoint_interval", self.osd()) {
                use nacre_osd::mdstore::{CHECKPOINT_INTERVAL_MAX, CHECKPOINT_INTERVAL_MIN};
                let secs = num(name, value)?;
                return self
                    .mdt
                    .store()
                    .set_checkpoint_interval(std::time::Duration::from_secs(secs))
                    .map_err(|_| {
                        format!(
                            "{name}: {secs} is out of range ({}..={} seconds)",
                            CHECKPOINT_INTERVAL_MIN.as_secs(),
                            CHECKPOINT_INTERVAL_MAX.as_secs()
                        )
                    });
            }
            let mdt = format!("mdt.{}-MDT{:04x}.", self.fsname, self.mdt.index);
            if let Some(short) = name.strip_prefix(&mdt)
                && short.starts_with("dom_scrub_")
            {
                return self.mdt.set_dom_param(short, value);
            }
            if name
                == format!(
                    "mdt.{}-MDT{:04x}.dom_read_open",
                    self.fsname, self.mdt.index
                )
            {
                self.mdt
                    .dom_read_open
                    .store(num(name, value)? != 0, std::sync::atomic::Ordering::Relaxed);
                return Ok(());
            }
            let mdt = format!("mdt.{}-MDT{:04x}.", self.fsname, self.mdt.index);
            match name.strip_prefix(&mdt) {
                Some("root_squash") => {
                    return self
                        .mdt
                        .squash
                        .set(value)
                        .map_err(|e| format!("{name}: {e}"));
                }
                Some("nosquash_nids") => {
                    return self
                        .mdt
                        .squash
                        .set_nosquash_nids(value)
                        .map_err(|e| format!("{name}: {e}"));
                }
                Some("export_grace") => {
                    return self
                        .mdt
                        .exports
                        .set_grace(value)
                        .map_err(|e| format!("{name}: {e}"));
                }
                Some("recovery_time_soft") => {
                    self.mdt
                        .recovery
                        .set_soft(nacre_rpc::target::parse_recovery_time(name, value)?);
                    return Ok(());
                }
                Some("recovery_time_hard") => {
                    self.mdt
                        .recovery
                        .set_hard(nacre_rpc::target::parse_recovery_time(name, value)?);
                    return Ok(());
                }
                _ => {}
            }
            return Err(format!("{name}: no such parameter"));
        };
        let mut p: LodParams = self.mdt.lod().params();
        match param {
            "stripesize" => {
                let s = parse_size(value).map_err(|e| e.to_string())?;
                if s == 0 || s % 65536 != 0 || s > u64::from(u32::MAX) {
                    return Err(format!(
                        "{name}: stripe size must be a non-zero multiple of 64 KiB"
                    ));
                }
                p.stripe_size = s as u32;
            }
            "stripecount" => {
                p.stripe_count = value
                    .trim()
                    .parse()
                    .map_err(|_| format!("{name}: '{value}' is not a number"))?;
                if p.stripe_count < -1 {
                    return Err(format!("{name}: stripe count must be -1 or more"));
                }
            }
            "stripeoffset" => {
                p.stripe_offset = value
                    .trim()
                    .parse()
                    .map_err(|_| format!("{name}: '{value}' is not a number"))?;
            }
            "dom_stripesize" => {
                p.dom_stripesize = dom_size(parse_size(value).map_err(|e| e.to_string())?)
            }
            "dom_stripesize_max_kb" => p.dom_stripesize = dom_size(num(name, value)? << 10),
            _ => return Err(format!("{name}: read-only or unknown parameter")),
        }
        self.mdt.lod().set_params(p);
        Ok(())
    }
}

/// Lustre's rule: rounded down to 64 KiB, raised to 64 KiB unless 0, at most 1 GiB.
pub fn dom_size(v: u64) -> u64 {
    if v == 0 {
        return 0;
    }
    (v.min(nacre_core::layout::MAX_DOM_SIZE) / 65536).max(1) * 65536
}

/// Everything a process exposes.
#[derive(Default)]
pub struct NodeParams {
    pub sources: Vec<Arc<dyn ParamSource>>,
}

impl NodeParams {
    /// Parameters whose name matches `pattern`, or (`within`) starts with components that do.
    pub fn list_matching(&self, pattern: &str, within: bool) -> Vec<ParamValue> {
        let pat = ParamPattern::new(pattern);
        self.sources
            .iter()
            .flat_map(|s| s.list())
            .filter(|p| {
                if within {
                    pat.matches_within(&p.name)
                } else {
                    pat.matches(&p.name)
                }
            })
            .collect()
    }

    /// Every device of the process, in set-up order; a node-wide service (`MDS`, `OSS`)
    /// comes with each target, and `lctl dl` lists it once for the node.
    pub fn devices(&self) -> Vec<Device> {
        self.sources.iter().flat_map(|s| s.devices()).collect()
    }

    /// Sets every parameter matching `pattern`; returns the names set.
    pub fn set_matching(&self, pattern: &str, value: &str) -> Result<Vec<String>, String> {
        let pat = ParamPattern::new(pattern);
        let mut done = Vec::new();
        for s in &self.sources {
            for p in s.list() {
                if pat.matches(&p.name) {
                    if !p.writable {
                        return Err(format!("{}: read-only parameter", p.name));
                    }
                    s.set(&p.name, value)?;
                    done.push(p.name);
                }
            }
        }
        Ok(done)
    }
}

/// Applies `set_param -P` records to this process's parameters (errors are logged).
pub fn apply_persistent(node: &NodeParams, records: &[(String, String)]) {
    for (pattern, value) in records {
        if let Err(e) = node.set_matching(pattern, value) {
            tracing::warn!("set_param -P {pattern}={value}: {e}");
        }
    }
}
