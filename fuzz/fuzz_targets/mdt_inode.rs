//! Stored inode records (V1 with every link inside, V2 with the first link, V3 with the
//! crash generation too): any bytes decode or give EIO; a decoded record encodes back to
//! one that decodes to itself, and a V1 record splits into its first link and the rest.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_mdt::records::{Decoded, Inode};

fuzz_target!(|data: &[u8]| {
    match Decoded::decode(data, 0) {
        Ok(Decoded::Current(ino)) => {
            let _ = ino.kind();
            let enc = ino.encode(0).expect("re-encode");
            assert_eq!(Inode::decode(&enc, 0), Ok(ino));
        }
        Ok(Decoded::V1(old)) => {
            let n = old.links.len();
            let (ino, rest) = old.split();
            assert_eq!(usize::from(ino.link.is_some()) + rest.len(), n);
            let enc = ino.encode(0).expect("re-encode");
            assert_eq!(Inode::decode(&enc, 0), Ok(ino));
        }
        Err(_) => {}
    }
});
