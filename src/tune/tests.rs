//! Tests of the tuning loop on a real model and a small TACO space.
