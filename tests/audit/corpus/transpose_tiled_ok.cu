// expect: clean
// argus: block-dim 32,8
// argus: requires n > 0 && n <= 8192 && n % 32 == 0
// argus: requires grid_dim.x * 32 == n && grid_dim.y * 32 == n
// argus: size in = n * n
// argus: size out = n * n
__global__ void transpose_tiled(const float *in, float *out, int n) {
  __shared__ float tile[32][33];
  int x = blockIdx.x * 32 + threadIdx.x;
  int y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    out[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}
