//! What `lfs osts`, `lfs mdts` and `lfs getname` print (`llapi_ostlist`, `print_instance`).

/// Which targets `lfs osts` / `lfs mdts` lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TgtKind {
    Ost,
    Mdt,
}

/// `llapi_ostlist`'s output for one mount: a header (`OBDS:` or `MDTS:`), then one line per
/// target, `INDEX: FSNAME-OSTxxxx_UUID STATE`. The state is the configuration's (`ACTIVE`
/// unless the target is deactivated or stopped), not whether it answers this moment.
pub fn tgt_list(kind: TgtKind, fsname: &str, targets: &[(u32, bool)]) -> String {
    let (header, tag) = match kind {
        TgtKind::Ost => ("OBDS", "OST"),
        TgtKind::Mdt => ("MDTS", "MDT"),
    };
    let mut out = format!("{header}:\n");
    for &(index, active) in targets {
        let state = if active { "ACTIVE" } else { "INACTIVE" };
        out.push_str(&format!(
            "{index}: {fsname}-{tag}{index:04x}_UUID {state}\n"
        ));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_lists_read_as_lustres() {
        assert_eq!(
            tgt_list(TgtKind::Ost, "testfs", &[(0, true), (1, false)]),
            "OBDS:\n0: testfs-OST0000_UUID ACTIVE\n1: testfs-OST0001_UUID INACTIVE\n"
        );
        assert_eq!(
            tgt_list(TgtKind::Mdt, "testfs", &[(10, true)]),
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
}
