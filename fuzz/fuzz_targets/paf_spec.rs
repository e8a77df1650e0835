//! PaF specifications as a user types them: a spec that parses prints as one that parses,
//! and an error points at a character of the input.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_bench::paf::spec::PafSpec;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match PafSpec::parse(text) {
        Ok(spec) => {
            let _ = spec.kind();
            let _ = spec.is_deterministic();
            let _ = spec.is_homogeneous();
            for g in 0..spec.generations.len() {
                let _ = spec.size_of(g);
            }
            // The canonical spelling parses back to the same spec.
            let printed = spec.to_string();
            let again = PafSpec::parse(&printed);
            assert_eq!(again.as_ref(), Ok(&spec), "printed as {printed:?}");
        }
        Err(e) => {
            assert!(e.pos <= text.len());
            let _ = e.column();
            let _ = e.to_string();
        }
    }
});
