//! Stage 4, comparison: from pairs to judged layers. Error statistics of one tensor pair
//! (`stats`), the tolerance each pair is judged by (`tolerance`) in the precision its values
//! were computed in (`precision`), every pair compared and the first divergence found
//! (`evaluate`), what an isolation run feeds and what its results say about where each
//! error is made (`isolation`), and element-level detail for the layers a reader looks at
//! (`details`).

pub mod details;
pub mod evaluate;
pub mod isolation;
pub mod precision;
pub mod stats;
pub mod tolerance;
