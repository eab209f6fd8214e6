// expect: clean
// argus: block-dim 256
// argus: size in = n
// argus: size out = n
__global__ void scan_db(const float *in, float *out, int n) {
  __shared__ float buf[2][256];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  int cur = 0;
  buf[0][t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int off = 1; off < 256; off <<= 1) {
    float v = buf[cur][t];
    if (t >= off) v += buf[cur][t - off];
    buf[1 - cur][t] = v;
    cur = 1 - cur;
    __syncthreads();
  }
  if (i < n) out[i] = buf[cur][t];
}
