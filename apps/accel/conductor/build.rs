//! `sqlx::migrate!` embeds `migrations/` when the crate compiles; cargo does not know
//! that, so a new or changed migration file alone would not rebuild the crate (and
//! `accel db sync` would not apply it). Rebuild whenever anything under it changes.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
