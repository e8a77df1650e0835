//! File layouts as stored in an inode and sent in requests: a decoded layout encodes and
//! decodes back to itself, the server's checks (`lod_verify_striping`'s rules) never
//! panic, and on a layout they accept, offset mapping is consistent; an object's kept
//! layout (`OstLayout`) decodes and encodes back to itself.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_core::{Layout, OstLayout};
use nacre_core::layout::Pattern;
use nacre_core::layout_rules::{LayoutCtx, check_structure, validate};

fuzz_target!(|data: &[u8]| {
    // The layout an OST object keeps beside its filter fid (stored bytes, read back by
    // the OST and the layout LFSCK).
    if let Some(l) = data.get(..OstLayout::BYTES).and_then(OstLayout::from_bytes) {
        assert_eq!(OstLayout::from_bytes(&l.to_bytes()), Some(l));
        let _ = l.is_sane() && l.holds_stripe(l.stripe_count.saturating_sub(1));
    }
    let Ok(layout) = postcard::from_bytes::<Layout>(data) else {
        return;
    };
    let enc = postcard::to_allocvec(&layout).expect("re-encode");
    assert_eq!(
        postcard::from_bytes::<Layout>(&enc).ok().as_ref(),
        Some(&layout)
    );
    let structure = check_structure(&layout);
    let on_fs = validate(&layout, &LayoutCtx::with_ost_count(4));
    if on_fs.is_ok() {
        assert!(
            structure.is_ok(),
            "accepted on a file system, refused in itself"
        );
    }
    let _ = layout.max_file_size();
    let _ = layout.max_size();
    let _ = layout.dom_size();
    let _ = layout.next_component_id();
    let _ = layout.instantiated_to(u64::MAX);
    if structure.is_err() {
        return;
    }
    for c in &layout.components {
        let _ = c.flags_string();
        if c.pattern != Pattern::Raid0 || c.objects.is_empty() {
            continue;
        }
        for off in [c.start, c.end.saturating_sub(1), c.start / 2 + c.end / 2] {
            if !c.contains(off) {
                continue;
            }
            assert!(layout.component_at(off).is_some());
            let (idx, obj_off) = c.map(off);
            assert!(idx < c.objects.len());
            assert_eq!(c.unmap(idx, obj_off), off);
            let _ = c.object_size_for_file_size(idx, off);
            let _ = c.file_size_from_object(idx, obj_off.saturating_add(1));
        }
    }
});
