//! What `lfs osts`, `lfs mdts`, `lfs getname` and `lfs check` print (`llapi_ostlist`,
//! `print_instance`, `llapi_target_check`).

use nacre_core::{TargetKind, TargetName};

/// `llapi_ostlist`'s output for one mount: a header (`OBDS:` for OSTs, `MDTS:` for MDTs),
/// then one line per target of `targets` of that kind, in index order,
/// `INDEX: FSNAME-OSTxxxx_UUID STATE`. The state is the configuration's (`ACTIVE` unless
/// the target is deactivated or stopped), not whether it answers this moment.
pub fn tgt_list(kind: TargetKind, fsname: &str, targets: &[(TargetName, bool)]) -> String {
    let header = if kind == TargetKind::Mdt {
        "MDTS"
    } else {
        "OBDS"
    };
    let mut shown: Vec<&(TargetName, bool)> =
        targets.iter().filter(|(t, _)| t.kind == kind).collect();
    shown.sort_unstable_by_key(|(t, _)| t.index);
    let mut out = format!("{header}:\n");
    for (t, active) in shown {
        let state = if *active { "ACTIVE" } else { "INACTIVE" };
        out.push_str(&format!("{}: {}_UUID {state}\n", t.index, t.full(fsname)));
    }
    out
}

/// What `lfs getname` prints of one mount: `FSNAME-INSTANCE` by default (`llapi_getname`),
/// the fsname alone with `-n`, the instance alone with `-i` (both or neither: the two
/// joined). The mount point follows when every mount is listed or several paths are
/// given.
pub fn getname_line(
    fsname: &str,
    instance: &str,
    only_fsname: bool,
    only_instance: bool,
    mountpoint: Option<&str>,
) -> String {
    let name = match (only_fsname, only_instance) {
        (true, false) => fsname.to_string(),
        (false, true) => instance.to_string(),
        _ => format!("{fsname}-{instance}"),
    };
    match mountpoint {
        Some(m) => format!("{name} {m}\n"),
        None => format!("{name}\n"),
    }
}

/// The device types `lfs check TYPE` pings, in the order it lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckType {
    Osc,
    Mdc,
    Mgc,
}

/// `lfs check osts|mdts|mds|mgts|servers|all`: the device types, in Lustre's order.
pub fn parse_check(word: &str) -> Option<Vec<CheckType>> {
    Some(match word {
        "osts" => vec![CheckType::Osc],
        "mdts" | "mds" => vec![CheckType::Mdc],
        "mgts" => vec![CheckType::Mgc],
        "servers" | "all" => vec![CheckType::Osc, CheckType::Mdc, CheckType::Mgc],
        _ => return None,
    })
}

/// A client device's name as `lfs check` and `lctl` show it: `FSNAME-OST0000-osc-INSTANCE`,
/// `FSNAME-MDT0000-mdc-INSTANCE`.
pub fn client_device(fsname: &str, target: TargetName, instance: &str) -> String {
    let class = if target.kind == TargetKind::Mdt {
        "mdc"
    } else {
        "osc"
    };
    format!("{}-{class}-{instance}", target.full(fsname))
}

/// `do_target_check`'s line for one device: `NAME active.` or `NAME inactive.` (ENOTCONN)
/// on standard output, or the error for standard error.
pub fn check_line(device: &str, result: Result<(), nacre_core::Errno>) -> Result<String, String> {
    match result {
        Ok(()) => Ok(format!("{device} active.\n")),
        Err(e) if e == nacre_core::Errno::ENOTCONN => Ok(format!("{device} inactive.\n")),
        Err(e) => Err(format!("error: check '{device}': {}", e.describe())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(kind: TargetKind, index: u32) -> TargetName {
        TargetName { kind, index }
    }

    #[test]
    fn target_lists_read_as_lustres() {
        let all = [
            (t(TargetKind::Ost, 1), false),
            (t(TargetKind::Mdt, 10), true),
            (t(TargetKind::Ost, 0), true),
        ];
        assert_eq!(
            tgt_list(TargetKind::Ost, "testfs", &all),
            "OBDS:\n0: testfs-OST0000_UUID ACTIVE\n1: testfs-OST0001_UUID INACTIVE\n"
        );
        assert_eq!(
            tgt_list(TargetKind::Mdt, "testfs", &all),
            "MDTS:\n10: testfs-MDT000a_UUID ACTIVE\n"
        );
    }

    #[test]
    fn getname_gives_what_each_option_asks() {
        let inst = "ffff8c2b5c3e9000";
        assert_eq!(
            getname_line("testfs", inst, false, false, Some("/mnt/lustre")),
            "testfs-ffff8c2b5c3e9000 /mnt/lustre\n"
        );
        assert_eq!(getname_line("testfs", inst, true, false, None), "testfs\n");
        assert_eq!(
            getname_line("testfs", inst, false, true, None),
            format!("{inst}\n")
        );
        assert_eq!(
            getname_line("testfs", inst, true, true, None),
            format!("testfs-{inst}\n")
        );
    }

    #[test]
    fn check_names_devices_and_states_as_lustre_does() {
        assert_eq!(
            parse_check("servers"),
            Some(vec![CheckType::Osc, CheckType::Mdc, CheckType::Mgc])
        );
        assert_eq!(parse_check("mds"), Some(vec![CheckType::Mdc]));
        assert_eq!(parse_check("clients"), None);
        let dev = client_device("testfs", t(TargetKind::Ost, 1), "ffff88");
        assert_eq!(dev, "testfs-OST0001-osc-ffff88");
        assert_eq!(
            client_device("testfs", t(TargetKind::Mdt, 0), "ffff88"),
            "testfs-MDT0000-mdc-ffff88"
        );
        assert_eq!(check_line(&dev, Ok(())), Ok(format!("{dev} active.\n")));
        assert_eq!(
            check_line(&dev, Err(nacre_core::Errno::ENOTCONN)),
            Ok(format!("{dev} inactive.\n"))
        );
        assert_eq!(
            check_line(&dev, Err(nacre_core::Errno::EIO)),
            Err(format!("error: check '{dev}': Input/output error"))
        );
    }
}
