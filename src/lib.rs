//! connector-tax
