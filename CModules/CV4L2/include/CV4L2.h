// CV4L2: the thin C shim between Swift and V4L2 / libv4l2.
//
// Why it exists: Swift cannot import function-like macros (VIDIOC_* are _IOWR()
// expressions, V4L2_PIX_FMT_* are v4l2_fourcc() calls) nor call the variadic
// v4l2_ioctl(). Everything else (structs, plain integer macros, v4l2_fd_open,
// v4l2_mmap) is imported directly from the system headers. No logic lives here.
#ifndef CV4L2_H
#define CV4L2_H

#include <linux/videodev2.h>
#include <libv4l2.h>
#include <sys/ioctl.h>

// MARK: ioctl requests (function-like macros in videodev2.h)
static const unsigned long CV4L2_VIDIOC_QUERYCAP = VIDIOC_QUERYCAP;
static const unsigned long CV4L2_VIDIOC_ENUM_FMT = VIDIOC_ENUM_FMT;
static const unsigned long CV4L2_VIDIOC_ENUM_FRAMESIZES = VIDIOC_ENUM_FRAMESIZES;
static const unsigned long CV4L2_VIDIOC_ENUM_FRAMEINTERVALS = VIDIOC_ENUM_FRAMEINTERVALS;
static const unsigned long CV4L2_VIDIOC_G_FMT = VIDIOC_G_FMT;
static const unsigned long CV4L2_VIDIOC_S_FMT = VIDIOC_S_FMT;
static const unsigned long CV4L2_VIDIOC_TRY_FMT = VIDIOC_TRY_FMT;
static const unsigned long CV4L2_VIDIOC_G_PARM = VIDIOC_G_PARM;
static const unsigned long CV4L2_VIDIOC_S_PARM = VIDIOC_S_PARM;
static const unsigned long CV4L2_VIDIOC_REQBUFS = VIDIOC_REQBUFS;
static const unsigned long CV4L2_VIDIOC_QUERYBUF = VIDIOC_QUERYBUF;
static const unsigned long CV4L2_VIDIOC_QBUF = VIDIOC_QBUF;
static const unsigned long CV4L2_VIDIOC_DQBUF = VIDIOC_DQBUF;
static const unsigned long CV4L2_VIDIOC_STREAMON = VIDIOC_STREAMON;
static const unsigned long CV4L2_VIDIOC_STREAMOFF = VIDIOC_STREAMOFF;
static const unsigned long CV4L2_VIDIOC_QUERYCTRL = VIDIOC_QUERYCTRL;
static const unsigned long CV4L2_VIDIOC_G_CTRL = VIDIOC_G_CTRL;
static const unsigned long CV4L2_VIDIOC_S_CTRL = VIDIOC_S_CTRL;
static const unsigned long CV4L2_VIDIOC_G_INPUT = VIDIOC_G_INPUT;

// MARK: pixel formats (v4l2_fourcc() macro calls)
static const unsigned int CV4L2_PIX_FMT_NV12 = V4L2_PIX_FMT_NV12;
static const unsigned int CV4L2_PIX_FMT_YUYV = V4L2_PIX_FMT_YUYV;
static const unsigned int CV4L2_PIX_FMT_MJPEG = V4L2_PIX_FMT_MJPEG;
static const unsigned int CV4L2_PIX_FMT_JPEG = V4L2_PIX_FMT_JPEG;
static const unsigned int CV4L2_PIX_FMT_YUV420 = V4L2_PIX_FMT_YUV420;

// MARK: control ids built from other macros
static const unsigned int CV4L2_CID_EXPOSURE_AUTO_PRIORITY = V4L2_CID_EXPOSURE_AUTO_PRIORITY;

// v4l2_ioctl() is variadic, which Swift cannot call.
static inline int cv4l2_ioctl(int fd, unsigned long request, void *argument) {
    return v4l2_ioctl(fd, request, argument);
}

// The kernel's ioctl(), bypassing libv4l2: used once per open to check that a
// node speaks V4L2 before libv4l2 sees it (libv4l2 prints its own errors for
// nodes that do not). ioctl() is variadic, which Swift cannot call.
static inline int cv4l2_kernel_ioctl(int fd, unsigned long request, void *argument) {
    return ioctl(fd, request, argument);
}

#endif
