print("camagent")
