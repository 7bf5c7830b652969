class G(torch.nn.Module):
    def forward(self, x: "f32[4]"):
        y = torch.ops.aten.add.Tensor(x, --9223372036854775808)
        return (y,)
