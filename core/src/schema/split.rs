//! Pre-split algorithms: HexStringSplit, DecimalStringSplit and UniformSplit, computing split
//! points exactly as HBase's `RegionSplitter` does. (Being written.)
