//! `lctl lfsck_start`, `lfsck_stop` and `lfsck_query` on this node: they reach the
//! checkers of the targets a process serves (`nacre up`, `nacre serve`) through its
//! control socket, as Lustre's reach the local devices through ioctls; and the checkers'
//! parameters and status files (`mdd.*.lfsck_*`: `lfsck_namespace`, `lfsck_layout`).

use crate::params::{ParamSource, ParamValue};
use nacre_core::Errno;
use nacre_lfsck::MdtLfsck;
use nacre_lustreapi::lfsck::{self as api, QueryCounts};
use nacre_rpc::lfsck::StartArgs;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The checkers of the targets this process serves.
#[derive(Default, Clone)]
pub struct LocalLfsck {
    pub mdts: Vec<Arc<MdtLfsck>>,
}

/// Why a control request failed: an errno and what to print.
pub type CtlErr = (Errno, String);

impl LocalLfsck {
    /// The devices served here.
    pub fn devices(&self) -> Vec<String> {
        self.mdts.iter().map(|m| m.dev.clone()).collect()
    }

    /// The MDT a command is for: `-M DEV`, else the only one served here (or the first
    /// with `-A`), as `lfsck_get_dev_name` picks.
    fn mdt(&self, device: Option<&str>, all: bool) -> Result<&Arc<MdtLfsck>, CtlErr> {
        if let Some(d) = device {
            return self
                .mdts
                .iter()
                .find(|m| m.dev == d || m.dev.ends_with(&format!("-{d}")))
                .ok_or((Errno::ENODEV, format!("{d}: no such device on this node")));
        }
        match self.mdts.len() {
            0 => Err((
                Errno::ENODEV,
                "Fail to get device name: no MDT device on this node. You can specify the device explicitly via '-M' option.".to_string(),
            )),
            1 => Ok(&self.mdts[0]),
            _ if all => Ok(&self.mdts[0]),
            _ => Err((
                Errno::EINVAL,
                "Detect multiple devices on current node. Please specify the device explicitly via '-M' option or '-A' option for all.".to_string(),
            )),
        }
    }

    /// `lfsck_start`: the device it started on and the types it runs.
    pub async fn start(
        &self,
        device: Option<&str>,
        args: StartArgs,
    ) -> Result<(String, u16), CtlErr> {
        let m = self.mdt(device, args.flags & api::LPF_ALL_TGT != 0)?;
        match m.start(args).await {
            Ok(active) => Ok((m.dev.clone(), active)),
            Err(e) => Err((e, format!("Fail to start LFSCK: {}", e.describe()))),
        }
    }

    /// `lfsck_stop`.
    pub async fn stop(&self, device: Option<&str>, all: bool) -> Result<String, CtlErr> {
        let m = self.mdt(device, all)?;
        match m.stop(all).await {
            Ok(()) => Ok(m.dev.clone()),
            Err(e) => Err((e, format!("Fail to stop LFSCK: {}", e.describe()))),
        }
    }

    /// `lfsck_query`: every target's status, as the device's MDT sees them.
    pub async fn query(&self, device: Option<&str>, types: u16) -> Result<QueryCounts, CtlErr> {
        let m = self.mdt(device, true)?;
        Ok(m.query_all(types).await)
    }
}

/// `mdd.<fs>-MDTxxxx.lfsck_*`.
pub struct LfsckParams {
    pub lfsck: LocalLfsck,
}

fn num(name: &str, value: &str) -> Result<u64, String> {
    value
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("{name}: '{value}' is not a number"))
}

impl ParamSource for LfsckParams {
    fn list(&self) -> Vec<ParamValue> {
        let mut v = Vec::new();
        for m in &self.lfsck.mdts {
            let base = format!("mdd.{}", m.dev);
            let p = |n: &str, value: String, writable: bool| ParamValue {
                name: format!("{base}.{n}"),
                value,
                writable,
            };
            v.push(p("lfsck_namespace", m.namespace_text(), false));
            v.push(p("lfsck_layout", m.layout_text(), false));
            v.push(p(
                "lfsck_speed_limit",
                m.speed_limit.load(Ordering::Relaxed).to_string(),
                true,
            ));
            v.push(p(
                "lfsck_async_windows",
                m.async_windows.load(Ordering::Relaxed).to_string(),
                true,
            ));
            v.push(p(
                "lfsck_adaptive_windows",
                u8::from(m.adaptive.load(Ordering::Relaxed)).to_string(),
                true,
            ));
            v.push(p(
                "lfsck_coupled",
                u8::from(m.coupled.load(Ordering::Relaxed)).to_string(),
                true,
            ));
            v.push(p("lfsck_repairs", m.repairs.text(), true));
            v.push(ParamValue {
                name: format!("osd-nacre.{}.oi_scrub", m.dev),
                value: m.oi_scrub_text(),
                writable: false,
            });
        }
        v
    }

    fn set(&self, name: &str, value: &str) -> Result<(), String> {
        for m in &self.lfsck.mdts {
            let Some(param) = name.strip_prefix(&format!("mdd.{}.", m.dev)) else {
                continue;
            };
            match param {
                "lfsck_speed_limit" => {
                    let v = u32::try_from(num(name, value)?)
                        .map_err(|_| format!("{name}: '{value}' is too large"))?;
                    m.speed_limit.store(v, Ordering::Relaxed);
                    m.state.lock().bookmark.speed_limit = v;
                }
                "lfsck_async_windows" => {
                    let v = num(name, value)?;
                    if v > u64::from(api::ASYNC_WIN_MAX) {
                        return Err(format!(
                            "{name}: at most {} (LFSCK_ASYNC_WIN_MAX)",
                            api::ASYNC_WIN_MAX
                        ));
                    }
                    let v = if v == 0 {
                        api::ASYNC_WIN_DEFAULT
                    } else {
                        v as u32
                    };
                    m.async_windows.store(v, Ordering::Relaxed);
                    m.state.lock().bookmark.async_windows = v;
                }
                "lfsck_adaptive_windows" => {
                    m.adaptive.store(num(name, value)? != 0, Ordering::Relaxed)
                }
                "lfsck_coupled" => m.coupled.store(num(name, value)? != 0, Ordering::Relaxed),
                "lfsck_repairs" => m.repairs.clear(),
                _ => return Err(format!("{name}: read-only or unknown parameter")),
            }
            return Ok(());
        }
        Err(format!("{name}: no such parameter"))
    }
}
