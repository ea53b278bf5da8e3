//! Tests of the schema's validation: table names and column-family settings.

use super::*;

#[test]
fn table_names() {
    assert!(TableName::parse("a:b").is_ok());
    assert!(TableName::parse("ns_1:t-2.x").is_ok());
    assert!(TableName::parse(":t").is_err());
    assert!(TableName::parse("ns:").is_err());
    assert!(TableName::parse("n-s:t").is_err());
    assert!(TableName::parse("ns:.t").is_err());
    assert!(TableName::parse("ns:t:u").is_err());
    assert!(TableName::parse("ns:t/u").is_err());
}

#[test]
fn families() {
    assert!(ColumnFamilyDescriptor::new("").validate().is_err());
    assert!(ColumnFamilyDescriptor::new("a:b").validate().is_err());
    assert!(ColumnFamilyDescriptor::new("f")
        .max_versions(0)
        .validate()
        .is_err());
    assert!(ColumnFamilyDescriptor::new("f")
        .max_versions(2)
        .min_versions(3)
        .validate()
        .is_err());
    assert!(ColumnFamilyDescriptor::new("f")
        .block_size(10)
        .validate()
        .is_err());
    let t = TableDescriptor::new(TableName::parse("t").unwrap())
        .family(ColumnFamilyDescriptor::new("f"))
        .family(ColumnFamilyDescriptor::new("f"));
    assert!(t.validate().is_err());
}
