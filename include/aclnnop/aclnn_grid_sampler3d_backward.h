/* Same file name as CANN's include/aclnnop/aclnn_grid_sampler3d_backward.h. */
#include "aclnn_ops.h"
