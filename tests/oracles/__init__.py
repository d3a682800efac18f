"""Independent readers the tests check tablesvc's tables against (today: hudi-rs)."""
