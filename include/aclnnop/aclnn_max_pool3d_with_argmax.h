/* Same file name as CANN's include/aclnnop/aclnn_max_pool3d_with_argmax.h. */
#include "aclnn_ops.h"
