//! catalog (being written).
