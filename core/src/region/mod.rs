//! Regions (being written).
