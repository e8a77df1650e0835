//! Every `PAF:` spec written in the PaF seed document parses, or (for the seed's templates
//! such as `PAF:AA.BB@264M`) fails with a caret on the placeholder.

use std::path::PathBuf;

use nacre_bench::paf::spec::PafSpec;

fn seed_text() -> Option<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        root.join("../../../shared/seeds/000_c11a0f18d0eb0111.txt"),
        root.join("../../shared/seeds/000_c11a0f18d0eb0111.txt"),
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok())
}

/// `PAF:` (any case), optional blanks, then the non-blank run that follows.
fn specs_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("paf:") {
        let start = from + i;
        let rest = &text[start + 4..];
        let blanks = rest.len() - rest.trim_start_matches(' ').len();
        let body: String = rest[blanks..]
            .chars()
            .take_while(|c| !c.is_whitespace())
            .collect();
        out.push(format!(
            "{}{}{}",
            &text[start..start + 4],
            " ".repeat(blanks),
            body
        ));
        from = start + 4;
    }
    out
}

#[test]
fn every_spec_in_the_seed() {
    let Some(text) = seed_text() else {
        eprintln!("note: the seed document is not beside this repository; test skipped");
        return;
    };
    let specs = specs_in(&text);
    assert!(specs.len() >= 10, "{specs:?}");
    let mut parsed = Vec::new();
    for s in &specs {
        match PafSpec::parse(s) {
            Ok(p) => parsed.push((s.clone(), p)),
            Err(e) => {
                // Templates and prose: the caret sits on the placeholder letter.
                let at = s[e.pos..].chars().next();
                assert!(
                    at.is_some_and(|c| c.is_ascii_alphabetic()),
                    "{s}: error not on a placeholder: {e}"
                );
                assert!(e.to_string().contains('^'));
            }
        }
    }
    let full: Vec<&String> = parsed
        .iter()
        .filter(|(_, p)| !p.sizes.is_empty() && p.capacity_kb == Some(24_253_639_848))
        .map(|(s, _)| s)
        .collect();
    // PAF: 70.30@…, PAF:70.30@…, PAF:70.30,20.40@…, PAF:70.30,20.40:67005@264M,40M<…
    assert!(full.len() >= 4, "{full:?}");
    assert!(
        parsed
            .iter()
            .any(|(_, p)| p.seed == Some(67005) && p.sizes.len() == 2)
    );
}
