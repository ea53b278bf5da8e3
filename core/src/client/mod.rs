//! Client (being written).
