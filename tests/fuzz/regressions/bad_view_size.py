class G(torch.nn.Module):
    def forward(self, x: "f32[4, 8]"):
        view: "f32[4294967296]" = torch.ops.aten.view.default(x, [4294967296]);  x = None
        return (view,)
