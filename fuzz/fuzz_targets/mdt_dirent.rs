//! Name entries, their keys, object-index values and FIDs as stored: whatever the bytes,
//! they parse or give an error, and what parses encodes back to the stored bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_core::Fid;
use nacre_mdt::records::{
    dirent_key, dirent_key_parts, dirent_value, name_hash, oi_value, parse_dirent, parse_inode_key,
    parse_oi_value,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = parse_dirent(data) {
        let enc = dirent_value(&d.fid, d.kind, d.ino);
        assert_eq!(parse_dirent(&enc), Ok(d));
    }
    if let Ok(ino) = parse_oi_value(data) {
        assert_eq!(&oi_value(ino)[..], &data[..8]);
    }
    let _ = parse_inode_key(data);
    if let Some(f) = Fid::from_bytes(data) {
        assert_eq!(&f.to_bytes()[..], &data[..16]);
    }
    if let Some((hash, name)) = dirent_key_parts(data) {
        let parent = Fid::from_bytes(data).expect("a key holds its parent FID");
        if hash == name_hash(name) {
            assert_eq!(dirent_key(&parent, name), data);
        }
    }
});
