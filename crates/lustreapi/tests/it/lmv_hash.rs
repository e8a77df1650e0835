//! Directory name hashes checked bit for bit against Lustre's C.
//!
//! The vectors were produced by a throwaway C program (not kept in this repository) that
//! re-types `lmv_hash_all_chars`, `lmv_hash_fnv1a`, `lmv_hash_crush`, `crush_hash`,
//! `lu_name_is_temp_file` and `lu_name_is_backup_file` from lustre-release
//! (`lustre/include/lustre_lmv.h`, `lustre/include/lu_object.h`) with the Linux kernel's
//! `<linux/ctype.h>` classes, and printed, for each name and stripe count,
//! all_char / fnv_1a_64 / crush / crush2 stripe indexes.

use nacre_core::lmv::{HashType, all_char, crush, fnv_1a_64};

type Row = (&'static [u8], u64, &'static [(u32, u32, u32, u32, u32)]);

/// (name, fnv_1a_64(name), [(count, all_char, fnv_1a_64, crush, crush2)]).
const VECTORS: &[Row] = &[
    (
        b"a",
        0xaf63dc4c8601ec8c,
        &[
            (2, 1, 0, 0, 0),
            (3, 1, 1, 2, 2),
            (4, 1, 0, 2, 2),
            (5, 2, 1, 2, 2),
            (7, 6, 5, 6, 6),
            (8, 1, 4, 6, 6),
            (13, 6, 11, 9, 9),
            (16, 1, 12, 14, 14),
            (100, 97, 96, 21, 21),
        ],
    ),
    (
        b"foo",
        0xdcb27518fed9d577,
        &[
            (2, 0, 1, 1, 1),
            (3, 0, 1, 1, 1),
            (4, 0, 3, 1, 1),
            (5, 4, 2, 1, 1),
            (7, 2, 2, 1, 1),
            (8, 4, 7, 7, 7),
            (13, 12, 11, 7, 7),
            (16, 4, 7, 15, 15),
            (100, 24, 7, 51, 51),
        ],
    ),
    (
        b"foobar",
        0x85944171f73967e8,
        &[
            (2, 1, 0, 0, 0),
            (3, 0, 0, 2, 2),
            (4, 1, 0, 2, 2),
            (5, 3, 3, 2, 2),
            (7, 3, 6, 2, 2),
            (8, 1, 0, 2, 2),
            (13, 9, 0, 2, 2),
            (16, 9, 8, 2, 2),
            (100, 33, 68, 34, 34),
        ],
    ),
    (
        b"file.txt",
        0x021802b0f58e99e5,
        &[
            (2, 0, 1, 0, 0),
            (3, 1, 1, 0, 0),
            (4, 2, 1, 0, 0),
            (5, 4, 3, 0, 0),
            (7, 2, 3, 0, 0),
            (8, 6, 5, 0, 0),
            (13, 8, 9, 0, 0),
            (16, 14, 5, 0, 0),
            (100, 14, 93, 0, 0),
        ],
    ),
    (
        b"file.txt~",
        0x1d662db1414f0261,
        &[
            (2, 0, 1, 0, 0),
            (3, 1, 2, 0, 0),
            (4, 0, 1, 0, 0),
            (5, 0, 1, 0, 0),
            (7, 2, 0, 0, 0),
            (8, 4, 1, 0, 0),
            (13, 4, 12, 0, 0),
            (16, 12, 1, 0, 0),
            (100, 40, 61, 0, 0),
        ],
    ),
    (
        b"data.BAK",
        0x8e9bd43c8860b049,
        &[
            (2, 0, 1, 0, 0),
            (3, 2, 0, 0, 0),
            (4, 2, 1, 0, 0),
            (5, 2, 0, 0, 0),
            (7, 4, 0, 6, 6),
            (8, 6, 1, 6, 6),
            (13, 12, 10, 6, 6),
            (16, 6, 9, 6, 6),
            (100, 62, 25, 70, 70),
        ],
    ),
    (
        b"data.bak",
        0xa1ac143d23939be9,
        &[
            (2, 0, 1, 0, 0),
            (3, 2, 0, 0, 0),
            (4, 2, 1, 0, 0),
            (5, 3, 4, 0, 0),
            (7, 2, 0, 6, 6),
            (8, 6, 1, 6, 6),
            (13, 4, 5, 6, 6),
            (16, 6, 9, 6, 6),
            (100, 58, 69, 70, 70),
        ],
    ),
    (
        b"report.orig",
        0x6767d99f578d2a4e,
        &[
            (2, 1, 0, 0, 0),
            (3, 1, 0, 0, 0),
            (4, 3, 2, 0, 0),
            (5, 2, 0, 4, 4),
            (7, 6, 2, 4, 4),
            (8, 3, 6, 4, 4),
            (13, 3, 9, 10, 10),
            (16, 11, 14, 10, 10),
            (100, 47, 30, 56, 56),
        ],
    ),
    (
        b"notes.sav",
        0xb72cc16bfddb5e36,
        &[
            (2, 1, 0, 1, 1),
            (3, 2, 1, 1, 1),
            (4, 1, 2, 3, 3),
            (5, 4, 2, 3, 3),
            (7, 5, 2, 3, 3),
            (8, 1, 6, 3, 3),
            (13, 6, 12, 8, 8),
            (16, 1, 6, 8, 8),
            (100, 29, 42, 66, 66),
        ],
    ),
    (
        b".report.pdf.aB3xYz",
        0xd504e5ce9031e6dc,
        &[
            (2, 1, 0, 1, 1),
            (3, 0, 2, 1, 1),
            (4, 1, 0, 1, 1),
            (5, 0, 0, 1, 1),
            (7, 6, 6, 1, 1),
            (8, 1, 4, 1, 1),
            (13, 1, 10, 1, 1),
            (16, 1, 12, 1, 1),
            (100, 65, 40, 53, 53),
        ],
    ),
    (
        b"report.pdf",
        0x8e31a9982d292027,
        &[
            (2, 0, 1, 1, 1),
            (3, 2, 0, 1, 1),
            (4, 0, 3, 1, 1),
            (5, 3, 4, 1, 1),
            (7, 6, 2, 1, 1),
            (8, 4, 7, 1, 1),
            (13, 1, 5, 1, 1),
            (16, 4, 7, 1, 1),
            (100, 28, 19, 53, 53),
        ],
    ),
    (
        b".report.pdf.123456",
        0x8fb68a8d02918420,
        &[
            (2, 1, 0, 1, 0),
            (3, 1, 0, 1, 2),
            (4, 1, 0, 1, 2),
            (5, 4, 0, 1, 2),
            (7, 1, 3, 1, 2),
            (8, 5, 0, 1, 7),
            (13, 12, 12, 1, 7),
            (16, 5, 0, 1, 13),
            (100, 29, 40, 53, 54),
        ],
    ),
    (
        b".report.pdf.a23456",
        0x89946758ff3e5350,
        &[
            (2, 1, 0, 1, 1),
            (3, 1, 2, 1, 1),
            (4, 1, 0, 1, 1),
            (5, 2, 1, 1, 1),
            (7, 0, 1, 6, 1),
            (8, 5, 0, 7, 1),
            (13, 8, 6, 9, 1),
            (16, 5, 0, 9, 1),
            (100, 77, 36, 66, 53),
        ],
    ),
    (
        b".report.pdf.1bcdef",
        0x4ebeb63879f44df0,
        &[
            (2, 1, 0, 1, 1),
            (3, 1, 0, 1, 1),
            (4, 1, 0, 1, 1),
            (5, 4, 3, 1, 1),
            (7, 3, 0, 1, 1),
            (8, 5, 0, 1, 1),
            (13, 5, 10, 1, 1),
            (16, 5, 0, 1, 1),
            (100, 69, 28, 53, 53),
        ],
    ),
    (
        b".report.pdf.ab-def",
        0x19553cd531f843a6,
        &[
            (2, 1, 0, 1, 0),
            (3, 1, 1, 1, 0),
            (4, 3, 2, 1, 0),
            (5, 3, 3, 1, 0),
            (7, 4, 1, 1, 0),
            (8, 7, 6, 1, 7),
            (13, 12, 4, 1, 10),
            (16, 15, 6, 1, 10),
            (100, 63, 98, 53, 10),
        ],
    ),
    (
        b".x.aB3xYz",
        0x19883dc4e2067654,
        &[
            (2, 1, 0, 1, 1),
            (3, 1, 0, 2, 2),
            (4, 1, 0, 3, 3),
            (5, 2, 2, 4, 4),
            (7, 1, 4, 4, 4),
            (8, 5, 4, 4, 4),
            (13, 3, 6, 4, 4),
            (16, 5, 4, 13, 13),
            (100, 57, 92, 84, 84),
        ],
    ),
    (
        b"output.6334.log",
        0xb9088f56c9e1167a,
        &[
            (2, 1, 0, 0, 1),
            (3, 0, 2, 0, 1),
            (4, 3, 2, 3, 3),
            (5, 1, 2, 3, 4),
            (7, 2, 6, 3, 4),
            (8, 7, 2, 3, 4),
            (13, 11, 3, 3, 4),
            (16, 15, 10, 3, 13),
            (100, 11, 2, 63, 61),
        ],
    ),
    (
        b"file.mdtest.12.12345",
        0x6907f5faa9eb71de,
        &[
            (2, 1, 0, 0, 0),
            (3, 2, 2, 0, 2),
            (4, 1, 2, 3, 2),
            (5, 0, 1, 3, 2),
            (7, 4, 3, 3, 2),
            (8, 5, 6, 3, 2),
            (13, 5, 5, 10, 10),
            (16, 13, 14, 10, 10),
            (100, 65, 6, 22, 28),
        ],
    ),
    (
        b"base.aB3xYz12",
        0x0f7cba39b8a8256e,
        &[
            (2, 1, 0, 1, 1),
            (3, 0, 2, 1, 1),
            (4, 1, 2, 1, 1),
            (5, 1, 1, 1, 1),
            (7, 2, 1, 1, 1),
            (8, 5, 6, 1, 1),
            (13, 9, 4, 12, 12),
            (16, 13, 14, 12, 12),
            (100, 1, 66, 12, 12),
        ],
    ),
    (
        b"base.12345678",
        0x6086b6ccc8b92782,
        &[
            (2, 1, 0, 1, 0),
            (3, 1, 0, 1, 0),
            (4, 1, 2, 1, 0),
            (5, 2, 0, 1, 0),
            (7, 2, 6, 1, 0),
            (8, 5, 2, 1, 0),
            (13, 6, 1, 12, 0),
            (16, 13, 2, 12, 0),
            (100, 77, 50, 12, 0),
        ],
    ),
    (
        b"base.a2345678",
        0x9f137fba7697cd52,
        &[
            (2, 1, 0, 0, 1),
            (3, 1, 0, 0, 1),
            (4, 1, 2, 0, 1),
            (5, 0, 2, 0, 1),
            (7, 1, 0, 0, 1),
            (8, 5, 2, 0, 1),
            (13, 2, 10, 0, 12),
            (16, 13, 2, 0, 12),
            (100, 25, 82, 33, 12),
        ],
    ),
    (
        b"base.1bcdefgh",
        0x7f2081e14aa2d1b2,
        &[
            (2, 1, 0, 1, 1),
            (3, 1, 2, 1, 1),
            (4, 1, 2, 1, 1),
            (5, 3, 1, 1, 1),
            (7, 2, 2, 1, 1),
            (8, 5, 2, 1, 1),
            (13, 4, 5, 12, 12),
            (16, 13, 2, 12, 12),
            (100, 13, 66, 12, 12),
        ],
    ),
    (
        b"base.ab_defgh",
        0x58e67392e5410efe,
        &[
            (2, 1, 0, 1, 0),
            (3, 0, 1, 1, 0),
            (4, 1, 2, 1, 0),
            (5, 2, 1, 1, 0),
            (7, 4, 0, 1, 0),
            (8, 1, 6, 1, 0),
            (13, 9, 1, 12, 10),
            (16, 9, 14, 12, 10),
            (100, 57, 46, 12, 10),
        ],
    ),
    (
        b".dot.aB3xYz12",
        0x5f419401e7ee0792,
        &[
            (2, 1, 0, 0, 0),
            (3, 1, 1, 0, 0),
            (4, 3, 2, 3, 3),
            (5, 3, 1, 3, 3),
            (7, 6, 2, 3, 3),
            (8, 7, 2, 3, 3),
            (13, 10, 5, 3, 3),
            (16, 7, 2, 3, 3),
            (100, 63, 6, 74, 74),
        ],
    ),
    (
        b"mdtest_tree.0.0",
        0xb582172e0ac98d1d,
        &[
            (2, 0, 1, 0, 0),
            (3, 1, 2, 0, 0),
            (4, 0, 1, 3, 3),
            (5, 2, 1, 3, 3),
            (7, 0, 3, 5, 5),
            (8, 4, 5, 5, 5),
            (13, 7, 6, 5, 5),
            (16, 12, 13, 5, 5),
            (100, 72, 81, 72, 72),
        ],
    ),
    (
        b"f.0000001",
        0xb17e6a53b2397a34,
        &[
            (2, 1, 0, 1, 1),
            (3, 2, 1, 1, 1),
            (4, 1, 0, 3, 3),
            (5, 0, 1, 4, 4),
            (7, 2, 5, 4, 4),
            (8, 5, 4, 4, 4),
            (13, 4, 6, 4, 4),
            (16, 5, 4, 13, 13),
            (100, 85, 36, 52, 52),
        ],
    ),
    (
        b".vimrc.swp",
        0x2398d70e349a9034,
        &[
            (2, 1, 0, 1, 1),
            (3, 2, 2, 1, 1),
            (4, 3, 0, 1, 1),
            (5, 3, 3, 1, 1),
            (7, 3, 2, 5, 5),
            (8, 7, 4, 5, 5),
            (13, 8, 6, 12, 12),
            (16, 7, 4, 12, 12),
            (100, 83, 48, 70, 70),
        ],
    ),
    (
        b"x.AAAAAAAA",
        0x39487fd4b457bd93,
        &[
            (2, 0, 1, 1, 1),
            (3, 2, 0, 1, 1),
            (4, 2, 3, 1, 1),
            (5, 1, 1, 1, 1),
            (7, 0, 6, 5, 5),
            (8, 6, 3, 5, 5),
            (13, 10, 2, 5, 5),
            (16, 14, 3, 5, 5),
            (100, 86, 31, 5, 5),
        ],
    ),
    (
        b"x.aaaaaaaa",
        0x720640b04fbb4dd3,
        &[
            (2, 0, 1, 0, 0),
            (3, 0, 2, 0, 0),
            (4, 2, 3, 0, 0),
            (5, 2, 4, 0, 0),
            (7, 4, 5, 6, 6),
            (8, 6, 3, 6, 6),
            (13, 6, 10, 6, 6),
            (16, 14, 3, 6, 6),
            (100, 42, 19, 62, 62),
        ],
    ),
    (
        b".~lock.doc#",
        0x2bf3411f35c61d73,
        &[
            (2, 0, 1, 0, 0),
            (3, 1, 0, 0, 0),
            (4, 0, 3, 0, 0),
            (5, 3, 2, 4, 4),
            (7, 1, 5, 6, 6),
            (8, 4, 3, 7, 7),
            (13, 0, 8, 10, 10),
            (16, 12, 3, 10, 10),
            (100, 88, 87, 62, 62),
        ],
    ),
    (
        b"a.\xc3\x84bcdE",
        0x778cd1ff162e1541,
        &[
            (2, 0, 1, 1, 1),
            (3, 2, 1, 1, 1),
            (4, 0, 1, 1, 1),
            (5, 1, 2, 1, 1),
            (7, 3, 0, 1, 1),
            (8, 4, 1, 1, 1),
            (13, 4, 10, 8, 8),
            (16, 4, 1, 8, 8),
            (100, 36, 37, 23, 23),
        ],
    ),
    (
        b".s.\xc3\x84b1cd",
        0x991a82b5445e70d5,
        &[
            (2, 0, 1, 0, 1),
            (3, 1, 2, 0, 1),
            (4, 0, 1, 0, 3),
            (5, 0, 2, 0, 4),
            (7, 5, 5, 5, 4),
            (8, 0, 5, 5, 7),
            (13, 9, 1, 5, 12),
            (16, 0, 5, 5, 12),
            (100, 80, 77, 43, 64),
        ],
    ),
    (
        b"n.\xc3\xa4\xc3\xa4xY12",
        0x769fa2eaf72b0351,
        &[
            (2, 0, 1, 0, 0),
            (3, 0, 0, 0, 0),
            (4, 2, 1, 0, 0),
            (5, 2, 2, 4, 0),
            (7, 6, 0, 4, 0),
            (8, 6, 1, 4, 0),
            (13, 12, 7, 4, 8),
            (16, 14, 1, 4, 8),
            (100, 82, 77, 4, 87),
        ],
    ),
    (
        b".q.\xc4b1cde",
        0xf8378d3b2ba443a3,
        &[
            (2, 0, 1, 1, 1),
            (3, 2, 1, 1, 1),
            (4, 0, 3, 1, 1),
            (5, 3, 0, 1, 1),
            (7, 1, 1, 1, 1),
            (8, 0, 3, 1, 1),
            (13, 3, 5, 8, 8),
            (16, 0, 3, 8, 8),
            (100, 48, 95, 48, 48),
        ],
    ),
    (
        b"x",
        0xaf63f54c86021707,
        &[
            (2, 0, 1, 1, 1),
            (3, 0, 2, 2, 2),
            (4, 0, 3, 3, 3),
            (5, 0, 1, 4, 4),
            (7, 1, 3, 4, 4),
            (8, 0, 7, 4, 4),
            (13, 3, 2, 4, 4),
            (16, 8, 7, 13, 13),
            (100, 20, 71, 84, 84),
        ],
    ),
];

#[test]
fn fnv_1a_64_matches_lustre() {
    for (name, fnv, _) in VECTORS {
        assert_eq!(fnv_1a_64(name), *fnv, "{}", String::from_utf8_lossy(name));
    }
}

#[test]
fn stripe_indexes_match_lustre() {
    for (name, _, rows) in VECTORS {
        let shown = String::from_utf8_lossy(name);
        for &(count, ac, fnv, cr, cr2) in rows.iter() {
            assert_eq!(all_char(name) % count, ac, "all_char {shown} / {count}");
            assert_eq!(
                HashType::AllChar.stripe_index(name, count),
                ac,
                "all_char {shown} / {count}"
            );
            assert_eq!(
                HashType::Fnv1a64.stripe_index(name, count),
                fnv,
                "fnv {shown} / {count}"
            );
            assert_eq!(
                HashType::Crush.stripe_index(name, count),
                cr,
                "crush {shown} / {count}"
            );
            assert_eq!(
                HashType::Crush2.stripe_index(name, count),
                cr2,
                "crush2 {shown} / {count}"
            );
        }
    }
}

#[test]
fn crush_hash32_matches_lustre() {
    assert_eq!(crush::hash32_2(0, 0), 430_787_817);
    assert_eq!(crush::hash32_2(1, 2), 3_079_532_188);
    assert_eq!(crush::hash32_2(4095, 7), 3_549_469_005);
    assert_eq!(crush::hash32_2(123_456_789, 99), 3_252_977_303);
}

#[test]
fn temporary_names_follow_their_target() {
    // rsync's ".name.XXXXXX" and dstripe's "name.XXXXXXXX" hash as "name".
    for (tmp, fin) in [
        (&b".report.pdf.aB3xYz"[..], &b"report.pdf"[..]),
        (b"base.aB3xYz12", b"base"),
        (b"file.txt~", b"file.txt"),
        (b"data.BAK", b"data"),
        (b"report.orig", b"report"),
        (b"notes.sav", b"notes"),
    ] {
        for count in [2, 3, 5, 8, 13] {
            for h in [HashType::Crush, HashType::Crush2] {
                assert_eq!(h.stripe_index(tmp, count), h.stripe_index(fin, count));
            }
        }
    }
    // Where CRUSH and CRUSH2 disagree (LU-15692): an all-digit suffix was "temporary"
    // for CRUSH, and a suffix with punctuation still is for CRUSH only.
    assert_eq!(
        crush::normalise(b".report.pdf.123456", false),
        b"report.pdf"
    );
    assert_eq!(
        crush::normalise(b".report.pdf.123456", true),
        b".report.pdf.123456"
    );
    assert_eq!(
        crush::normalise(b".report.pdf.a23456", false),
        b".report.pdf.a23456"
    );
    assert_eq!(crush::normalise(b".report.pdf.a23456", true), b"report.pdf");
    assert_eq!(crush::normalise(b"output.6334.log", false), b"output");
    assert_eq!(
        crush::normalise(b"output.6334.log", true),
        b"output.6334.log"
    );
    assert_eq!(crush::normalise(b"base.ab_defgh", false), b"base");
    assert_eq!(crush::normalise(b"base.ab_defgh", true), b"base.ab_defgh");
    // Single-case suffixes are real extensions.
    assert_eq!(crush::normalise(b"x.aaaaaaaa", true), b"x.aaaaaaaa");
    assert_eq!(crush::normalise(b"x.AAAAAAAA", false), b"x.AAAAAAAA");
}

#[test]
fn crush_moves_few_names_when_stripes_are_added() {
    let names: Vec<String> = (0..4000).map(|i| format!("file.{i}")).collect();
    let moved = names
        .iter()
        .filter(|n| {
            HashType::Crush2.stripe_index(n.as_bytes(), 8)
                != HashType::Crush2.stripe_index(n.as_bytes(), 9)
        })
        .count();
    // Adding one stripe to eight should move about 1/9 of the names, fnv about 8/9.
    assert!(moved < names.len() / 5, "{moved}");
    let fnv_moved = names
        .iter()
        .filter(|n| {
            HashType::Fnv1a64.stripe_index(n.as_bytes(), 8)
                != HashType::Fnv1a64.stripe_index(n.as_bytes(), 9)
        })
        .count();
    assert!(fnv_moved > names.len() / 2, "{fnv_moved}");
}
