//! POSIX ACL xattrs as a client sets them: checked as the kernel checks them; an ACL that
//! passes encodes to one that decodes to the same entries (the ids of the owner, owning
//! group, mask and other entries written as undefined, as the kernel writes them).
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_core::acl::{Acl, GROUP, USER};

fuzz_target!(|data: &[u8]| {
    if let Ok(acl) = Acl::decode(data) {
        let enc = acl.encode();
        assert_eq!(enc.len(), data.len());
        let back = Acl::decode(&enc).expect("an encoded ACL decodes");
        assert_eq!(back.entries.len(), acl.entries.len());
        for (a, b) in acl.entries.iter().zip(&back.entries) {
            assert_eq!((a.tag, a.perm), (b.tag, b.perm));
            if matches!(a.tag, USER | GROUP) {
                assert_eq!(a.id, b.id);
            }
        }
        assert_eq!(back.encode(), enc);
    }
});
