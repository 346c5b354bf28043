module github.com/dbaas/dbaas-go

go 1.19
