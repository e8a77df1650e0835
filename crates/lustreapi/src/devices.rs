//! What `lctl dl` (`device_list`) prints: one line per device of the node, as the kernel's
//! `devices` file has it (`obd_device_list_seq_show`), `-t` adding the NID each client
//! device is connected to (`print_obd_line`), `-y` the YAML of the netlink interface
//! (`lustre_family`'s `devices` list).

use crate::error::{Error, Result};
use crate::getopt::{HasArg, LongOpt, OptSpec, Parsed, getopt, lo};
use serde::{Deserialize, Serialize};

/// A device's state as `lctl dl` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeviceStatus {
    /// Set up and serving (`UP`).
    Up,
    /// Set up, but the configuration has its target deactivated or stopped (`IN`).
    Inactive,
}

impl DeviceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceStatus::Up => "UP",
            DeviceStatus::Inactive => "IN",
        }
    }
}

/// One device of a node: its type (`obd_type`), name, UUID and how many references to
/// it the process holds, and for a client device the NID of the target it talks to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    pub status: DeviceStatus,
    pub class: String,
    pub name: String,
    pub uuid: String,
    pub refcount: u32,
    /// `osc`/`mdc` only: the target's NID (`ost_conn_uuid`, `mds_conn_uuid`).
    pub conn: Option<String>,
}

/// How `lctl dl` was asked to print.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DlOptions {
    /// `-t`/`--target`: the connection's NID after each client device.
    pub target: bool,
    /// `-y`/`--yaml`.
    pub yaml: bool,
}

const DL_LONG: &[LongOpt] = &[
    lo("target", HasArg::No, 't' as u32),
    lo("yaml", HasArg::No, 'y' as u32),
];

/// Parses `lctl dl [--target|-t] [--yaml|-y]`; any operand is a usage error, as in
/// `jt_device_list`.
pub fn parse_dl<S: AsRef<str>>(args: &[S]) -> Result<DlOptions> {
    let cmd = "lctl dl";
    let spec = OptSpec {
        short: "ty",
        long: DL_LONG,
        in_order: false,
        long_only: false,
    };
    let args: Vec<String> = args.iter().map(|a| a.as_ref().to_string()).collect();
    let mut o = DlOptions::default();
    for item in getopt(cmd, &spec, &args)? {
        match item {
            Parsed::Opt { val, text, .. } => match char::from_u32(val) {
                Some('t') => o.target = true,
                Some('y') => o.yaml = true,
                _ => return Err(Error::usage(cmd, format!("unrecognized option '{text}'"))),
            },
            Parsed::Operand(p) => return Err(Error::usage(cmd, format!("unexpected '{p}'"))),
        }
    }
    Ok(o)
}

/// The node's device list, numbered from 0 in the order given.
pub fn format_dl(devices: &[Device], o: DlOptions) -> String {
    let mut out = String::new();
    if o.yaml {
        out.push_str("devices:\n");
        for (i, d) in devices.iter().enumerate() {
            out.push_str(&format!(
                "  - index: {i}\n    status: {}\n    type: {}\n    name: {}\n    uuid: {}\n    refcount: {}\n",
                d.status.as_str(),
                d.class,
                d.name,
                d.uuid,
                d.refcount
            ));
        }
        return out;
    }
    for (i, d) in devices.iter().enumerate() {
        out.push_str(&format!(
            "{i:3} {} {} {} {} {}",
            d.status.as_str(),
            d.class,
            d.name,
            d.uuid,
            d.refcount
        ));
        if o.target
            && let Some(nid) = &d.conn
        {
            out.push(' ');
            out.push_str(nid);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(class: &str, name: &str, uuid: &str, conn: Option<&str>) -> Device {
        Device {
            status: DeviceStatus::Up,
            class: class.into(),
            name: name.into(),
            uuid: uuid.into(),
            refcount: 4,
            conn: conn.map(str::to_string),
        }
    }

    #[test]
    fn lines_read_as_the_kernels_devices_file() {
        let mut devs = vec![
            dev("mgs", "MGS", "MGS", None),
            dev("obdfilter", "testfs-OST0000", "testfs-OST0000_UUID", None),
            dev(
                "osc",
                "testfs-OST0000-osc-ffff8b2a7a8d4800",
                "c0ffee",
                Some("192.168.0.10@tcp"),
            ),
        ];
        devs[2].status = DeviceStatus::Inactive;
        assert_eq!(
            format_dl(&devs, DlOptions::default()),
            "  0 UP mgs MGS MGS 4\n  1 UP obdfilter testfs-OST0000 testfs-OST0000_UUID 4\n  \
             2 IN osc testfs-OST0000-osc-ffff8b2a7a8d4800 c0ffee 4\n"
        );
        let t = format_dl(
            &devs,
            DlOptions {
                target: true,
                yaml: false,
            },
        );
        assert!(t.ends_with(" c0ffee 4 192.168.0.10@tcp\n"), "{t}");
        assert!(t.contains("MGS MGS 4\n"), "{t}");
        let y = format_dl(
            &devs[..1],
            DlOptions {
                target: false,
                yaml: true,
            },
        );
        assert_eq!(
            y,
            "devices:\n  - index: 0\n    status: UP\n    type: mgs\n    name: MGS\n    uuid: MGS\n    refcount: 4\n"
        );
    }

    #[test]
    fn options_and_operands() {
        assert_eq!(parse_dl::<&str>(&[]).expect("none"), DlOptions::default());
        assert_eq!(
            parse_dl(&["-t", "--yaml"]).expect("both"),
            DlOptions {
                target: true,
                yaml: true
            }
        );
        assert!(parse_dl(&["-x"]).expect_err("bad option").is_usage());
        assert!(parse_dl(&["osc"]).expect_err("operand").is_usage());
        use nacre_core::target::nid_of;
        assert_eq!(nid_of("10.0.0.3:9880"), "10.0.0.3@tcp");
        assert_eq!(nid_of("[::1]:9880"), "::1@tcp");
    }
}
