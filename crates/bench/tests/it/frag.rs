//! Fragmentation reports: a real dumpe2fs of an ext4 image made here (compared with
//! e2freefrag on the same image), and the extent report of a tree.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use nacre_bench::backend::PosixFs;
use nacre_bench::env::RunEnv;
use nacre_bench::frag::{self, FragOptions, dumpe2fs};
use nacre_bench::rank::World;

fn tool(name: &str) -> Option<std::path::PathBuf> {
    frag::find_tool(name)
}

fn run(cmd: &Path, args: &[&str]) -> Option<std::process::Output> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then_some(out)
}

#[test]
fn dumpe2fs_of_a_real_ext4_image() {
    let (Some(mke2fs), Some(dump)) = (tool("mke2fs"), tool("dumpe2fs")) else {
        eprintln!("note: mke2fs/dumpe2fs not installed (Debian: e2fsprogs); test skipped");
        return;
    };
    let tmp = tempfile::tempdir().expect("tmp");
    let img = tmp.path().join("img");
    let img_s = img.to_str().expect("utf8 path");

    // The plain image the issue describes.
    run(&mke2fs, &["-q", "-F", "-t", "ext4", img_s, "8M"]).expect("mke2fs");
    let out = run(&dump, &[img_s]).expect("dumpe2fs");
    let s = dumpe2fs::parse(&out.stdout[..], "img").expect("parse");
    assert_eq!(s.block_count, 8192);
    assert!(s.groups >= 1);
    assert_eq!(s.group_free_blocks, s.free_blocks, "a quiet image adds up");
    assert_eq!(s.group_free_inodes, s.free_inodes);
    assert_eq!(
        s.free_extents.total_blocks, s.free_blocks,
        "every free block is in an extent"
    );
    assert_eq!(s.inode_classes.total(), s.groups);

    // A fragmented one: many small groups, files written then every other one removed.
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).expect("mkdir");
    for i in 1..=40u32 {
        std::fs::write(src.join(format!("f{i}")), vec![b'x'; (i * 7000) as usize]).expect("write");
    }
    let src_s = src.to_str().expect("utf8");
    if run(
        &mke2fs,
        &[
            "-q", "-F", "-t", "ext4", "-b", "1024", "-g", "1024", "-N", "256", "-d", src_s, img_s,
            "8M",
        ],
    )
    .is_none()
    {
        eprintln!("note: this mke2fs has no -d; fragmented image skipped");
        return;
    }
    if let Some(debugfs) = tool("debugfs") {
        for i in (1..=40).step_by(2) {
            let _ = run(&debugfs, &["-w", "-R", &format!("rm f{i}"), img_s]);
        }
    }
    let out = run(&dump, &[img_s]).expect("dumpe2fs");
    let s = dumpe2fs::parse(&out.stdout[..], "img").expect("parse");
    assert_eq!(s.groups, 8);
    assert_eq!(s.blocks_per_group, 1024);
    assert_eq!(s.free_extents.total_blocks, s.free_blocks);
    assert!(
        s.free_extents.count > 3,
        "fragmented free space: {}",
        s.free_extents.count
    );

    let mut text = Vec::new();
    dumpe2fs::print_text(&s, &mut text).expect("print");
    let text = String::from_utf8(text).expect("utf8");
    assert!(text.starts_with(&format!(
        "Summary: 8192 blocks ({} free), {} inodes ({} free)\n8 block groups with 1024 blocks and {} inodes each:",
        s.free_blocks, s.inode_count, s.free_inodes, s.inodes_per_group
    )));
    assert!(text.contains("block groups with many (> 50%) free inodes,"));

    // e2freefrag reads the same image: its extent statistics and histogram must be ours.
    if let Some(e2ff) = tool("e2freefrag") {
        let theirs =
            String::from_utf8(run(&e2ff, &[img_s]).expect("e2freefrag").stdout).expect("utf8");
        let from = |t: &str| {
            t[t.find("Min. free extent").expect("min line")..]
                .trim_end()
                .to_string()
        };
        assert_eq!(
            from(&text),
            from(&theirs),
            "ours:\n{text}\ntheirs:\n{theirs}"
        );
    } else {
        eprintln!("note: e2freefrag not installed; histogram cross-check skipped");
    }
}

#[test]
fn tree_report_counts_extents() {
    let tmp = tempfile::tempdir().expect("tmp");
    let d = tmp.path();
    std::fs::create_dir_all(d.join("a/b")).expect("mkdir");
    std::fs::write(d.join("a/one"), vec![1u8; 256 * 1024]).expect("write");
    std::fs::write(d.join("a/b/two"), vec![2u8; 64 * 1024]).expect("write");
    std::fs::write(d.join("empty"), b"").expect("write");
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
    let opts = FragOptions {
        top: 2,
        free_space: true,
        device: None,
    };
    let r = frag::tree_report(&env, d, &opts).expect("report");
    assert_eq!(r.files, 3);
    assert_eq!(r.dirs, 3);
    assert_eq!(r.bytes, 320 * 1024);
    let mapped = r.files - r.unmapped_files;
    if mapped > 0 {
        // The empty file has no extents; the others at least one each.
        assert!(r.extents >= 2);
        assert_eq!(r.histogram[0].files, 1, "one file with 0 extents");
        assert_eq!(r.histogram.iter().map(|b| b.files).sum::<u64>(), mapped);
        assert_eq!(r.worst.len(), 2);
        assert!(r.worst[0].extents >= r.worst[1].extents);
    }
    let mut text = Vec::new();
    frag::print_tree(&r, &mut text).expect("print");
    let text = String::from_utf8(text).expect("utf8");
    assert!(text.contains("3 files in 3 directories"));
    assert!(text.contains("Free space fragmentation:"));
    let missing = d.join("gone");
    let e = frag::tree_report(&env, &missing, &opts).expect_err("missing");
    assert_eq!(
        e.to_string(),
        format!("directory {} does not exist", missing.display())
    );
}
