//! SplitMix64: the generator's only source of randomness, so a seed fixes every byte it writes.

#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Stream `n` under `seed`: document `n` is the same whichever documents are generated.
    pub fn stream(seed: u64, n: u64) -> Rng {
        let mut r = Rng(seed ^ n.wrapping_mul(0xA076_1D64_78BD_642F));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Log-uniform in `0..n`: rank r drawn with probability ∝ 1/(r+1), a Zipf law with exponent 1.
    pub fn zipf(&mut self, n: usize) -> usize {
        let r = ((n as f64 + 1.0).ln() * self.unit()).exp() - 1.0;
        (r as usize).min(n - 1)
    }
}
