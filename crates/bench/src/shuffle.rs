//! Random orders without tables: a keyed bijection on `0..n` (a small Feistel network with
//! cycle walking), so shuffling millions of offsets or files costs no memory.

use crate::paf::plan::mix_seed;

/// A pseudo-random permutation of `0..n`.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    half: u32,
    keys: [u64; 4],
}

impl Permutation {
    pub fn new(n: u64, seed: u64) -> Self {
        // Smallest even bit width whose domain covers n, so cycle walking takes < 4 steps on
        // average.
        let mut bits = 2;
        while bits < 64 && (1u128 << bits) < n as u128 {
            bits += 2;
        }
        let keys = [
            mix_seed(seed, 1, 0),
            mix_seed(seed, 2, 0),
            mix_seed(seed, 3, 0),
            mix_seed(seed, 4, 0),
        ];
        Permutation {
            n,
            half: bits / 2,
            keys,
        }
    }

    fn round_trip(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half) - 1;
        let (mut l, mut r) = (x >> self.half, x & mask);
        for k in self.keys {
            let f = mix_seed(r, k, 0) & mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half) | r
    }

    /// The image of `i` (for `i < n`).
    pub fn apply(&self, i: u64) -> u64 {
        if self.n <= 1 {
            return i;
        }
        let mut y = self.round_trip(i);
        while y >= self.n {
            y = self.round_trip(y);
        }
        y
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_a_bijection() {
        for n in [1u64, 2, 3, 10, 100, 1000, 4097] {
            let p = Permutation::new(n, 7);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let y = p.apply(i);
                assert!(y < n);
                assert!(!seen[y as usize], "n={n} dup {y}");
                seen[y as usize] = true;
            }
        }
        let a: Vec<u64> = (0..50).map(|i| Permutation::new(50, 1).apply(i)).collect();
        let b: Vec<u64> = (0..50).map(|i| Permutation::new(50, 2).apply(i)).collect();
        assert_ne!(a, b);
        assert_ne!(a, (0..50).collect::<Vec<_>>());
    }
}
