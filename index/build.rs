//! Intentionally empty: this package depends on `cc` at build time only so that Cargo's feature
//! unification turns on `cc/parallel` for usearch's numkong kernels (several C files compiled at
//! -O3), which otherwise build one at a time on the critical path of every clean build.

fn main() {}
